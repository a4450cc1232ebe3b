#include "ocslab/testing/processes.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

namespace ocslab::testing {

namespace {

// The whole file with read(2), or nothing when it cannot be opened or read (the process is gone).
std::optional<std::string> read_proc_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Calls fn(pid, name) for every process directory in /proc (name: the pid as the kernel spells it).
template <typename Fn>
void for_each_pid(Fn&& fn) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    fn(static_cast<pid_t>(std::stol(name)), name);
  }
}

}  // namespace

std::string ProcessEntry::args_text() const {
  std::string s = cmdline;
  for (auto& c : s) {
    if (c == '\0') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  for_each_pid([&](pid_t pid, const std::string& name) {
    if (auto cmdline = read_proc_file("/proc/" + name + "/cmdline")) out.push_back({pid, std::move(*cmdline)});
  });
  return out;
}

std::vector<pid_t> descendants_of(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  for_each_pid([&](pid_t pid, const std::string& name) {
    auto stat = read_proc_file("/proc/" + name + "/stat");
    if (!stat) return;
    const auto close = stat->rfind(')');  // the comm before it may hold spaces and parentheses
    char state = 0;
    int ppid = -1;
    if (close == std::string::npos || std::sscanf(stat->c_str() + close + 1, " %c %d", &state, &ppid) != 2) return;
    children.emplace(static_cast<pid_t>(ppid), pid);
  });
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (auto [it, last] = children.equal_range(p); it != last; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

std::vector<ProcessEntry> processes_matching(const std::string& needle) {
  std::vector<ProcessEntry> out;
  for (auto& p : list_processes()) {
    if (p.args_text().find(needle) != std::string::npos) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ocslab::testing
