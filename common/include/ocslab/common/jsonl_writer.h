// JSON-lines output: one compact JSON object per line, flushed per record so a reader
// (or a crash) never sees half a record. A failed write throws naming the file.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <ostream>
#include <string>

namespace ocslab {

class JsonLinesWriter {
 public:
  // name is what errors call the stream: the CLIs hand their standard output here.
  explicit JsonLinesWriter(std::ostream& out, std::string name = "standard output")
      : out_(&out), name_(std::move(name)) {}
  explicit JsonLinesWriter(const std::string& path);

  // Throws ocslab::Error naming the file when the record did not reach it (full disk).
  void write(const nlohmann::json& record);

 private:
  std::ofstream file_;
  std::ostream* out_;
  std::string name_;
};

}  // namespace ocslab
