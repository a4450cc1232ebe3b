#include "ocslab/agent/spool_retention.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <limits>
#include <tuple>

#include "ocslab/common/error.h"

namespace ocslab::agent {

namespace {

constexpr std::string_view kPrefix = "capture-", kSuffix = ".jsonl";

bool name_char(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x80 && (std::isalnum(u) || c == '.' || c == '_' || c == '-');
}

// The number and the one-letter unit of "12h" / "4G" / "300".
std::pair<uint64_t, char> number_and_unit(const std::string& text, const std::string& what, const char* units) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  const char* end = text.data() + text.size();
  char unit = 0;
  if (ec == std::errc() && p != text.data() && p + 1 == end &&
      std::string_view(units).find(*p) != std::string_view::npos) {
    unit = *p;
  } else if (ec != std::errc() || p == text.data() || p != end) {
    throw Error(fmt::format("{} '{}' is not a number with an optional unit ({})", what, text, units));
  }
  if (n == 0) throw Error(fmt::format("{} '{}' must be more than 0", what, text));
  return {n, unit};
}

uint64_t scaled(uint64_t n, uint64_t by, const std::string& text, const std::string& what) {
  if (n > std::numeric_limits<uint64_t>::max() / by) throw Error(fmt::format("{} '{}' is too large", what, text));
  return n * by;
}

}  // namespace

std::string spool_file_name(const std::string& capture) {
  return std::string(kPrefix) + capture + std::string(kSuffix);
}

bool is_spool_file_name(std::string_view name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return false;
  }
  std::string_view id = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return id[0] != '.' && std::all_of(id.begin(), id.end(), name_char);
}

std::vector<SpoolFile> list_spool_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw SystemError("read spool folder " + dir, errno);
  std::vector<SpoolFile> out;
  while (dirent* e = ::readdir(d)) {
    if (!is_spool_file_name(e->d_name)) continue;
    std::string path = dir + "/" + e->d_name;
    struct stat st {};
    // lstat: a symlink with a spool's name is not a spool (and is never followed).
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({std::move(path), static_cast<uint64_t>(st.st_size), st.st_mtime});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const SpoolFile& a, const SpoolFile& b) {
    return std::tie(a.mtime, a.path) < std::tie(b.mtime, b.path);
  });
  return out;
}

int64_t delete_spool_file(const std::string& dir, const std::string& capture) {
  std::string path = dir + "/" + spool_file_name(capture);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return -1;
    throw SystemError("spool " + path, errno);
  }
  if (S_ISLNK(st.st_mode)) throw Error("spool " + path + " is a symlink; not deleting it");
  if (!S_ISREG(st.st_mode)) throw Error("spool " + path + " is not a regular file; not deleting it");
  // unlink never follows a symlink: a file swapped in since the lstat is removed, not its target.
  if (::unlink(path.c_str()) != 0) throw SystemError("delete spool " + path, errno);
  return static_cast<int64_t>(st.st_size);
}

RetentionReport enforce_retention(const std::string& dir, const RetentionOptions& options, const std::string& keep_path,
                                  std::time_t now) {
  RetentionReport report;
  auto files = list_spool_files(dir);
  uint64_t total = 0;
  for (const auto& f : files) total += f.bytes;
  const std::time_t oldest = now - static_cast<std::time_t>(options.max_age.count());
  for (const auto& f : files) {  // oldest first
    if (f.path == keep_path) continue;
    if (f.mtime >= oldest && total <= options.max_bytes) continue;
    if (::unlink(f.path.c_str()) != 0) {
      if (errno != ENOENT) report.errors.push_back(SystemError("delete spool " + f.path, errno).what());
      continue;
    }
    ++report.deleted;
    report.freed_bytes += f.bytes;
    total -= f.bytes;
  }
  return report;
}

std::chrono::seconds parse_age(const std::string& text, const std::string& what) {
  auto [n, unit] = number_and_unit(text, what, "smhd");
  uint64_t by = unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 1;
  uint64_t s = scaled(n, by, text, what);
  if (s > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    throw Error(fmt::format("{} '{}' is too large", what, text));
  return std::chrono::seconds(static_cast<int64_t>(s));
}

uint64_t parse_size(const std::string& text, const std::string& what) {
  auto [n, unit] = number_and_unit(text, what, "KMGT");
  uint64_t by = unit == 'K'   ? 1ULL << 10
                : unit == 'M' ? 1ULL << 20
                : unit == 'G' ? 1ULL << 30
                : unit == 'T' ? 1ULL << 40
                              : 1;
  return scaled(n, by, text, what);
}

}  // namespace ocslab::agent
