// fn(0) .. fn(n - 1) on a thread each, returning when all are done: for work that waits on
// different hosts (an SSH round trip each), not for CPU work. fn reports its own failures: an
// exception escaping it ends the program (std::thread), so callers catch inside.
#pragma once

#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace ocslab {

inline void in_parallel(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (auto& t : threads) t.join();
}

}  // namespace ocslab
