#include "ocslab/probes/gid_table.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

namespace ocslab::probes {

namespace fs = std::filesystem;

namespace {

std::string_view trim_line(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return s;
}

// At most 48 characters of what a file held, control bytes as \xNN: for a log line.
std::string printable_text(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 48)) {
    auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u >= 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return s.size() > 48 ? out + "..." : out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A device or port folder name we are willing to put into a path: a plain word.
bool plain_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

std::optional<int> small_number(std::string_view s, int limit) {
  int v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0 || v >= limit) return std::nullopt;
  return v;
}

std::vector<std::string> plain_entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return out;
  for (const auto& e : it) {
    std::string n = e.path().filename().string();
    if (plain_name(n)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Entries in ports/<p>/gids: one past the highest number, capped.
int gid_table_size(const fs::path& port_dir) {
  int size = 0;
  for (const auto& n : plain_entries(port_dir / "gids"))
    if (auto i = small_number(n, kMaxGidTable)) size = std::max(size, *i + 1);
  return size;
}

std::string slot_path(const std::string& root, const GidPort& p, const char* what, int index) {
  return fmt::format("{}/{}/ports/{}/{}/{}", root, p.device, p.port, what, index);
}

}  // namespace

GidType parse_gid_type(std::string_view text) {
  text = trim_line(text);
  if (text == "RoCE v2") return GidType::kRoceV2;
  if (text == "IB/RoCE v1") return GidType::kRoceV1;
  return GidType::kUnknown;
}

const char* gid_type_name(GidType t) {
  switch (t) {
    case GidType::kRoceV1:
      return "roce_v1";
    case GidType::kRoceV2:
      return "roce_v2";
    case GidType::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<GidBytes> parse_sysfs_gid(std::string_view text) {
  text = trim_line(text);
  if (text.size() != 39) return std::nullopt;  // 8 x 4 digits + 7 colons
  GidBytes g{};
  for (size_t group = 0; group < 8; ++group) {
    const size_t at = group * 5;
    if (group < 7 && text[at + 4] != ':') return std::nullopt;
    int v = 0;
    for (size_t k = 0; k < 4; ++k) {
      int d = hex_digit(text[at + k]);
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    g[group * 2] = static_cast<uint8_t>(v >> 8);
    g[group * 2 + 1] = static_cast<uint8_t>(v & 0xff);
  }
  return g;
}

std::string gid_address(const GidBytes& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  in6_addr a{};
  std::memcpy(&a, g.data(), g.size());
  if (!::inet_ntop(AF_INET6, &a, buf, sizeof(buf))) return "?";
  return buf;
}

bool gid_empty(const GidBytes& g) {
  return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; });
}

bool gid_link_local(const GidBytes& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

std::optional<std::string> read_sysfs_line(const std::string& path, std::string& why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  char buf[kMaxSysfsRead];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  int err = errno;
  ::close(fd);
  if (n < 0) {
    why = std::strerror(err);
    return std::nullopt;
  }
  return std::string(buf, static_cast<size_t>(n));
}

std::vector<GidPort> find_gid_ports(const std::string& interface, const std::string& sysfs_root) {
  std::vector<GidPort> out;
  for (const auto& dev : plain_entries(sysfs_root)) {
    const fs::path ports = fs::path(sysfs_root) / dev / "ports";
    for (const auto& pn : plain_entries(ports)) {
      auto port = small_number(pn, 256);
      if (!port) continue;
      GidPort gp{dev, *port, gid_table_size(ports / pn)};
      bool serves = false;
      for (int i = 0; i < gp.table_size && !serves; ++i) {
        std::string why;
        auto ndev = read_sysfs_line(slot_path(sysfs_root, gp, "gid_attrs/ndevs", i), why);
        serves = ndev && trim_line(*ndev) == interface;
      }
      if (serves) out.push_back(gp);
    }
  }
  return out;
}

GidTableReader::GidTableReader(std::string sysfs_root, std::string interface, std::vector<GidPort> ports)
    : root_(std::move(sysfs_root)), interface_(std::move(interface)), ports_(std::move(ports)) {
  for (const auto& p : ports_) slots_.emplace_back(static_cast<size_t>(std::clamp(p.table_size, 0, kMaxGidTable)));
  highest_.assign(ports_.size(), -1);
}

void GidTableReader::read_slot(const GidPort& p, int index, Slot& s) {
  std::string why;
  const std::string path = slot_path(root_, p, "gids", index);
  auto text = read_sysfs_line(path, why);
  std::optional<GidBytes> g = text ? parse_sysfs_gid(*text) : std::nullopt;
  if (!g) {
    if (text) why = fmt::format("'{}' is not a GID", printable_text(trim_line(*text)));
    // Not a removal: the slot keeps its last reading until the file reads again.
    if (!s.failing) errors_.push_back(fmt::format("{}: {}", path, why));
    s.failing = true;
    return;
  }
  const bool changed = *g != s.gid || s.failing;
  s.failing = false;
  if (!changed && s.known) return;
  s.gid = *g;
  s.ours = false;
  s.known = true;
  s.type = GidType::kUnknown;
  if (gid_empty(*g)) return;
  // The netdev and type of a slot in use. They are read again at the next poll when either read
  // failed: an entry being added or removed between the reads, or one without a netdev (IB).
  auto ndev = read_sysfs_line(slot_path(root_, p, "gid_attrs/ndevs", index), why);
  s.known = ndev.has_value();
  s.ours = ndev && trim_line(*ndev) == interface_;
  if (!s.ours) return;
  auto type = read_sysfs_line(slot_path(root_, p, "gid_attrs/types", index), why);
  s.known = type.has_value();
  s.type = type ? parse_gid_type(*type) : GidType::kUnknown;
}

std::vector<GidEntry> GidTableReader::read(bool full) {
  errors_.clear();
  std::vector<GidEntry> out;
  for (size_t pi = 0; pi < ports_.size(); ++pi) {
    auto& slots = slots_[pi];
    const int size = static_cast<int>(slots.size());
    const int upto = full ? size : std::min(size, highest_[pi] + 1 + kScanMargin);
    int highest = -1;
    for (int i = 0; i < size; ++i) {
      Slot& s = slots[static_cast<size_t>(i)];
      if (i < upto) read_slot(ports_[pi], i, s);
      if (!gid_empty(s.gid)) highest = i;
      if (s.ours) out.push_back({ports_[pi].device, ports_[pi].port, i, s.gid, s.type});
    }
    highest_[pi] = highest;
  }
  return out;
}

std::vector<GidChange> diff_gid_tables(const std::vector<GidEntry>& before, const std::vector<GidEntry>& after) {
  using Key = std::tuple<std::string, int, int>;
  std::map<Key, const GidEntry*> old;
  for (const auto& e : before) old[{e.device, e.port, e.index}] = &e;
  std::vector<GidChange> out;
  for (const auto& e : after) {
    auto it = old.find({e.device, e.port, e.index});
    if (it == old.end()) {
      out.push_back({GidChange::Kind::kAdded, e, {}});
      continue;
    }
    if (!(*it->second == e)) out.push_back({GidChange::Kind::kChanged, e, *it->second});
    old.erase(it);
  }
  for (const auto& [key, e] : old) out.push_back({GidChange::Kind::kRemoved, *e, {}});
  return out;
}

}  // namespace ocslab::probes
