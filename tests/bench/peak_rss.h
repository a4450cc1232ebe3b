// The benchmarks' memory figure: this process's peak resident set (VmHWM) from /proc.
#pragma once

#include <fstream>
#include <string>

namespace ocslab::bench {

// VmHWM of /proc/self/status in KiB, -1 when it cannot be read.
inline long vm_hwm_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace ocslab::bench
