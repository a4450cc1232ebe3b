#include "ocslab/common/csv_writer.h"

#include <cerrno>
#include <cstring>

#include "ocslab/common/error.h"

namespace ocslab {

CsvWriter::CsvWriter(const std::string& path) : file_(path, std::ios::trunc), out_(&file_), name_(path) {
  if (!file_) throw Error("cannot open CSV output file '" + path + "'");
}

void CsvWriter::fail(const char* what) const {
  // errno is what the failed write(2) left (ENOSPC for a full disk); the stream keeps no reason.
  int err = errno;
  throw Error(std::string("cannot ") + what + " CSV output " +
              (name_ == "standard output" ? name_ : "'" + name_ + "'") +
              (err ? std::string(": ") + std::strerror(err) : std::string()));
}

void CsvWriter::flush() {
  errno = 0;
  out_->flush();
  if (!*out_) fail("write");
}

void CsvWriter::close() {
  flush();
  if (out_ == &file_ && file_.is_open()) {
    errno = 0;
    file_.close();
    if (!file_) fail("close");
  }
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
  // A state check, not a system call: most rows only fill the buffer; the one that makes the
  // buffer spill to a full disk fails here, and flush() catches the rest.
  errno = 0;
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  if (!*out_) fail("write");
}

}  // namespace ocslab
