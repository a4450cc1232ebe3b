#include "ocslab/common/jsonl_writer.h"

#include <cerrno>
#include <cstring>

#include "ocslab/common/error.h"

namespace ocslab {

JsonLinesWriter::JsonLinesWriter(const std::string& path) : file_(path, std::ios::trunc), out_(&file_), name_(path) {
  if (!file_) throw Error("cannot open JSON-lines output file '" + path + "'");
}

void JsonLinesWriter::write(const nlohmann::json& record) {
  errno = 0;
  *out_ << record.dump() << '\n';
  out_->flush();
  if (!*out_) {
    int err = errno;  // what the failed write(2) left, ENOSPC for a full disk
    throw Error("cannot write JSON-lines output " + (name_ == "standard output" ? name_ : "'" + name_ + "'") +
                (err ? std::string(": ") + std::strerror(err) : std::string()));
  }
}

}  // namespace ocslab
