// JSON-lines output: one compact JSON object per line, flushed per record so a reader
// (or a crash) never sees half a record.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <ostream>
#include <string>

namespace ocslab {

class JsonLinesWriter {
 public:
  explicit JsonLinesWriter(std::ostream& out) : out_(&out) {}
  explicit JsonLinesWriter(const std::string& path);

  void write(const nlohmann::json& record);

 private:
  std::ofstream file_;
  std::ostream* out_;
};

}  // namespace ocslab
