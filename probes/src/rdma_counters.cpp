#include "ocslab/probes/rdma_counters.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace ocslab::probes {

namespace fs = std::filesystem;

namespace {

// sysfs counters are one unsigned decimal number and a newline.
bool parse_counter(std::string_view text, uint64_t& out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

std::string printable(std::string_view text) {
  std::string s;
  for (char c : text.substr(0, 40)) {
    if (c == '\n') {
      s += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      s += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      s += c;
    }
  }
  return text.size() > 40 ? s + "..." : s;
}

}  // namespace

std::string RdmaCounters::port_dir(const std::string& device, int port, const std::string& sysfs_root) {
  return fmt::format("{}/{}/ports/{}", sysfs_root, device, port);
}

RdmaCounters::RdmaCounters(std::string port_dir) : dir_(std::move(port_dir)) {
  for (const auto& [folder, prefix] : {std::pair{"hw_counters", "hw."}, std::pair{"counters", "pma."}}) {
    std::error_code ec;
    fs::directory_iterator it(fs::path(dir_) / folder, ec);
    if (ec) continue;  // a driver without that group: nothing to list
    for (const auto& e : it) {
      std::error_code ec2;
      if (!e.is_regular_file(ec2)) continue;
      std::string file = e.path().filename().string();
      if (file == "lifespan") continue;  // how long the driver caches its stats, not a counter
      Counter c;
      c.name = prefix + file;
      c.path = e.path().string();
      c.fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (c.fd < 0) {
        list_errors_.push_back(fmt::format("{}: {}", c.path, std::strerror(errno)));
        continue;
      }
      counters_.push_back(std::move(c));
    }
  }
  std::sort(counters_.begin(), counters_.end(), [](const Counter& a, const Counter& b) { return a.name < b.name; });
}

RdmaCounters::~RdmaCounters() {
  for (auto& c : counters_) {
    if (c.fd >= 0) ::close(c.fd);
  }
}

std::vector<std::string> RdmaCounters::names() const {
  std::vector<std::string> out;
  for (const auto& c : counters_) out.push_back(c.name);
  return out;
}

RdmaCounters::Reading RdmaCounters::read() {
  Reading r;
  for (auto& c : counters_) {
    char buf[64];
    // pread at offset 0 makes sysfs produce the value afresh, with no lseek in between.
    ssize_t n = ::pread(c.fd, buf, sizeof(buf), 0);
    std::string why;
    uint64_t v = 0;
    if (n < 0) {
      why = std::strerror(errno);
    } else if (!parse_counter(std::string_view(buf, static_cast<size_t>(n)), v)) {
      why = fmt::format("'{}' is not a counter value (expected an unsigned decimal number)",
                        printable(std::string_view(buf, static_cast<size_t>(n))));
    }
    if (!why.empty()) {
      if (!c.failing) r.errors.push_back(fmt::format("{}: {}", c.path, why));
      c.failing = true;
      continue;
    }
    c.failing = false;
    if (!c.have) {
      r.changes.push_back({c.name, v, 0, true});
    } else if (v != c.value) {
      r.changes.push_back({c.name, v, static_cast<double>(v) - static_cast<double>(c.value), false});
    }
    c.have = true;
    c.value = v;
  }
  return r;
}

}  // namespace ocslab::probes
