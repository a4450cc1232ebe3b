// Ops CSV files (ops-rank<R>.csv) come back from other machines and get hand-edited: any bytes
// must read as op records or give an ocslab::ConfigError naming the file, and records that
// read must survive a write and a second read unchanged. Each line also checks common's CSV
// line splitter against CsvWriter: whatever fields it splits out come back from their escaped
// form.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/op_record.h"

using namespace ocslab;

namespace {

void check_line_round_trip(std::string_view line) {
  std::vector<std::string> fields = split_csv_line(line);
  if (fields.empty()) __builtin_trap();  // an empty line is one empty field
  std::string again;
  for (size_t i = 0; i < fields.size(); ++i) again += (i ? "," : "") + CsvWriter::escape(fields[i]);
  if (split_csv_line(again) != fields) __builtin_trap();
}

std::string write(const std::vector<workloads::OpRecord>& records) {
  std::ostringstream out;
  CsvWriter w(out);
  w.header(workloads::op_csv_columns());
  for (const auto& r : records) w.row(workloads::op_csv_fields(r));
  return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    check_line_round_trip(std::string_view(text).substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::vector<workloads::OpRecord> records;
  try {
    records = workloads::parse_op_csv(text, "fuzz.csv");
  } catch (const ConfigError& e) {
    if (std::string(e.what()).rfind("fuzz.csv:", 0) != 0) __builtin_trap();  // file:line first
    return 0;
  }
  std::string written = write(records);
  auto back = workloads::parse_op_csv(written, "written.csv");  // what ocslab writes must read
  if (back.size() != records.size()) __builtin_trap();
  for (size_t i = 0; i < records.size(); ++i) {
    if (workloads::op_csv_fields(back[i]) != workloads::op_csv_fields(records[i])) __builtin_trap();
  }
  return 0;
}
