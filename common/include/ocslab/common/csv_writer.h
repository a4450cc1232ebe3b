// RFC 4180 CSV output: a header row, then rows of fields quoted only when needed.
#pragma once

#include <fstream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab {

class CsvWriter {
 public:
  explicit CsvWriter(std::ostream& out) : out_(&out) {}
  // Opens (truncates) a file; throws ocslab::Error naming the path on failure.
  explicit CsvWriter(const std::string& path);

  void header(const std::vector<std::string>& columns);
  void row(const std::vector<std::string>& fields);
  void flush() { out_->flush(); }

  static std::string escape(std::string_view field);

 private:
  std::ofstream file_;
  std::ostream* out_;
  size_t columns_ = 0;
};

}  // namespace ocslab
