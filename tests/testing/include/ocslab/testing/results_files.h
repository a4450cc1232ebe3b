// Reading a results folder's files in tests: the runner's capture streams and any CSV by line.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ocslab/common/csv_reader.h"

namespace ocslab::testing {

// The seq column (the last) of a capture stream, capture/host.<h>.csv, in file order.
inline std::vector<uint64_t> capture_seqs(const std::string& path) {
  std::vector<uint64_t> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) out.push_back(std::stoull(line.substr(line.rfind(',') + 1)));
  return out;
}

// How many lines of the file contain needle (0 when it cannot be read).
inline int count_rows(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

// (op, algbw, busbw) of every row of a collbench ops-rank<R>.csv, from its own header: the GB/s
// the file holds (6 decimals), so busbw / algbw is the factor the program applied.
struct OpBandwidth {
  std::string op;
  double algbw = 0, busbw = 0;
};
inline std::vector<OpBandwidth> ops_bandwidths(const std::string& text) {
  std::vector<OpBandwidth> out;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return out;
  auto header = ocslab::split_csv_line(line);
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t op = col("op"), alg = col("algbw_GBps"), bus = col("busbw_GBps");
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto f = ocslab::split_csv_line(line);
    out.push_back({f.at(op), std::stod(f.at(alg)), std::stod(f.at(bus))});
  }
  return out;
}

}  // namespace ocslab::testing
