#include "ocslab/common/csv_writer.h"

#include "ocslab/common/error.h"

namespace ocslab {

CsvWriter::CsvWriter(const std::string& path) : file_(path, std::ios::trunc), out_(&file_) {
  if (!file_) throw Error("cannot open CSV output file '" + path + "'");
}

std::string CsvWriter::escape(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

void CsvWriter::header(const std::vector<std::string>& columns) {
  columns_ = columns.size();
  row(columns);
}

void CsvWriter::row(const std::vector<std::string>& fields) {
  if (columns_ != 0 && fields.size() != columns_) {
    throw Error("CSV row has " + std::to_string(fields.size()) + " fields, header has " +
                std::to_string(columns_));
  }
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += escape(fields[i]);
  }
  line += '\n';
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
}

}  // namespace ocslab
