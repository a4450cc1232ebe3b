#include "ocslab/common/jsonl_writer.h"

#include "ocslab/common/error.h"

namespace ocslab {

JsonLinesWriter::JsonLinesWriter(const std::string& path)
    : file_(path, std::ios::trunc), out_(&file_) {
  if (!file_) throw Error("cannot open JSON-lines output file '" + path + "'");
}

void JsonLinesWriter::write(const nlohmann::json& record) {
  *out_ << record.dump() << '\n';
  out_->flush();
}

}  // namespace ocslab
