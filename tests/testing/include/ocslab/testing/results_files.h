// Reading a results folder's files in tests: the runner's capture streams and any CSV by line.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

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

}  // namespace ocslab::testing
