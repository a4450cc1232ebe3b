// Reading back what CsvWriter writes, one line at a time: for the small CSV files ocslab reads
// whole (ops rows, the emulator's ground truth). Large timelines go through
// ocslab::analysis::read_timeline, which maps the file and keeps only the rows it needs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ocslab {

// Splits one CSV line into its fields (RFC 4180 quoting: a field in double quotes may hold
// commas and doubled quotes). Lenient, because a row may still be being written: a quote left
// open runs to the end of the line, and carriage returns outside quotes are dropped. A line
// break inside a quoted field is not handled: the caller splits the text into lines first.
std::vector<std::string> split_csv_line(std::string_view line);

}  // namespace ocslab
