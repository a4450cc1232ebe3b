// RFC 4180 CSV output: a header row, then rows of fields quoted only when needed.
// A write that fails (full disk, closed pipe) throws instead of leaving a silently truncated file.
#pragma once

#include <fstream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab {

class CsvWriter {
 public:
  // name is what errors call the stream: the CLIs hand their standard output here.
  explicit CsvWriter(std::ostream& out, std::string name = "standard output") : out_(&out), name_(std::move(name)) {}
  // Opens (truncates) a file; throws ocslab::Error naming the path on failure.
  explicit CsvWriter(const std::string& path);

  // row() and flush() throw ocslab::Error naming the file once the stream has failed. A row
  // may sit in the stream's buffer: only flush() or close() proves it reached the file.
  void header(const std::vector<std::string>& columns);
  void row(const std::vector<std::string>& fields);
  void flush();
  // Flushes and, for a file, closes it (a close can fail too). The destructor cannot report
  // a failure, so a writer whose output matters ends with close() or flush().
  void close();

  const std::string& name() const { return name_; }
  static std::string escape(std::string_view field);

 private:
  [[noreturn]] void fail(const char* what) const;

  std::ofstream file_;
  std::ostream* out_;
  std::string name_;
  size_t columns_ = 0;
};

}  // namespace ocslab
