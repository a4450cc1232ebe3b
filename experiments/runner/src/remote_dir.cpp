#include "ocslab/runner/remote_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "ocslab/common/durable_file.h"
#include "ocslab/common/error.h"
#include "ocslab/common/safe_fs.h"
#include "ocslab/common/shell.h"
#include "ocslab/common/text.h"
#include "ocslab/ocsctl/ssh_session.h"

namespace ocslab::runner {

namespace {

constexpr size_t kTemplateLength = 10;  // mktemp's X's
constexpr auto kRemoteTimeout = std::chrono::seconds(60);

bool remote_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }

std::string sh_word(const std::string& word) { return shell_join({word}); }

// NAME_MAX on Linux: a longer name is not a file this runner asked the host for.
constexpr size_t kMaxFileName = 255;

// The name as it may be shown in a message: a control byte (a terminal escape from a hostile
// host) written as \xHH, and at most 80 bytes of it.
std::string printable(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 80)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\')
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  if (name.size() > 80) out += "...";
  return out;
}

}  // namespace

std::string plain_file_name_problem(std::string_view name) {
  if (name.empty()) return "empty";
  if (name.size() > kMaxFileName) return fmt::format("longer than {} bytes", kMaxFileName);
  if (name == "." || name == "..") return "'.' and '..' are folders";
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/') return "'/' is not allowed";
    if (u < 0x20 || u == 0x7f) return "control characters are not allowed";
  }
  return {};
}

namespace {}  // namespace

std::string remote_dir_prefix(const std::string& run_id, const std::string& mode) {
  std::string name = "ocslab-phase-" + run_id + "-" + mode;
  for (char& c : name) {
    if (!remote_name_char(c)) c = '_';
  }
  return "/tmp/" + name;
}

std::string mktemp_command(const std::string& prefix) {
  return "mktemp -d " + sh_word(prefix + "." + std::string(kTemplateLength, 'X'));
}

std::string parse_mktemp_output(const std::string& out, const std::string& prefix) {
  std::string path = out;
  if (!path.empty() && path.back() == '\n') path.pop_back();
  bool ok = path.size() == prefix.size() + 1 + kTemplateLength && path.compare(0, prefix.size(), prefix) == 0 &&
            path[prefix.size()] == '.';
  for (size_t i = prefix.size() + 1; ok && i < path.size(); ++i) ok = std::isalnum(static_cast<unsigned char>(path[i]));
  if (!ok) {
    throw Error(fmt::format("mktemp answered '{}', not a folder name {}.{}", out.substr(0, 200), prefix,
                            std::string(kTemplateLength, 'X')));
  }
  return path;
}

std::string make_remote_dir(ocs::SshSession& s, const std::string& prefix, const std::string& name,
                            const std::string& text) {
  auto made = s.exec(mktemp_command(prefix), kRemoteTimeout);
  if (made.exit_status != 0) {
    throw Error(fmt::format("{}: mktemp -d failed (status {}): {}", s.describe(), made.exit_status, last_line(made.err)));
  }
  std::string dir;
  try {
    dir = parse_mktemp_output(made.out, prefix);
  } catch (const Error& e) {
    throw Error(s.describe() + ": " + e.what());
  }
  auto wrote = s.exec("cat > " + sh_word(dir + "/" + name), kRemoteTimeout, text);
  if (wrote.exit_status != 0) {
    throw Error(fmt::format("{}: cannot write {}/{}: {}", s.describe(), dir, name, last_line(wrote.err)));
  }
  return dir;
}

std::string check_dir_command(const std::string& dir) {
  std::string d = sh_word(dir);
  return fmt::format(
      "if [ -L {0} ]; then echo {0} is a symlink >&2; exit 3; fi; "
      "if [ ! -d {0} ]; then echo {0} is not a folder >&2; exit 3; fi; "
      "if [ ! -O {0} ]; then echo {0} is not owned by the SSH user >&2; exit 3; fi",
      d);
}

void check_remote_dir(ocs::SshSession& s, const std::string& dir) {
  auto r = s.exec(check_dir_command(dir), kRemoteTimeout);
  if (r.exit_status == 0) return;
  std::string why = last_line(r.err);
  throw Error(fmt::format("{}: {}; refusing to use it", s.describe(),
                          why.empty() ? fmt::format("cannot check {} (status {})", dir, r.exit_status) : why));
}

std::string sizes_command(const std::string& dir, const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) list += " " + sh_word(n);
  return fmt::format(
      "{} && cd {} && for f in{}; do if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then "
      "printf '%s %s\\n' \"$f\" \"$(wc -c < \"$f\")\" || exit 1; fi; done",
      check_dir_command(dir), sh_word(dir), list);
}

std::vector<RemoteFile> parse_sizes(const std::string& out) {
  std::vector<RemoteFile> files;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    RemoteFile f;
    std::string rest;
    if (!(words >> f.name >> f.size) || (words >> rest)) {
      throw Error("unexpected line in a file listing: '" + printable(line) + "'");
    }
    // The name becomes a local path (local_dir/NAME): a host answering "../x" must not choose
    // where the runner writes.
    if (auto why = plain_file_name_problem(f.name); !why.empty()) {
      throw Error(fmt::format("the file listing names '{}', not a plain file name ({})", printable(f.name), why));
    }
    files.push_back(f);
  }
  return files;
}

FetchResult fetch_verified(ocs::SshSession& s, const std::string& dir, const std::vector<std::string>& names,
                           const std::string& local_dir) {
  auto listed = s.exec(sizes_command(dir, names), kRemoteTimeout);
  if (listed.exit_status != 0) {
    std::string why = last_line(listed.err);
    throw Error(fmt::format("{}: {}; refusing to use it", s.describe(),
                            why.empty() ? fmt::format("cannot list {} (status {})", dir, listed.exit_status) : why));
  }
  std::vector<RemoteFile> files;
  try {
    files = parse_sizes(listed.out);
    for (const auto& f : files) {
      // Only what was asked for: a host cannot add files (or a name twice) to the run's results.
      if (std::find(names.begin(), names.end(), f.name) == names.end()) {
        throw Error(fmt::format("the file listing names '{}', not one of the files asked for", printable(f.name)));
      }
    }
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {} in {}; refusing to copy from it", s.describe(), e.what(), dir));
  }
  FetchResult result;
  for (const auto& f : files) {
    std::string local = local_dir + "/" + f.name;
    try {
      auto r = s.exec("cat " + sh_word(dir + "/" + f.name), kRemoteTimeout);
      if (r.exit_status != 0) throw Error(fmt::format("cat failed on the host: {}", last_line(r.err)));
      write_file_atomic(local, [&](DurableFile& f) { f.append(r.out); });
      uint64_t on_disk = std::filesystem::file_size(local);
      if (r.out.size() != f.size || on_disk != f.size) {
        throw Error(fmt::format("{} bytes on the host, {} received, {} in {}", f.size, r.out.size(), on_disk, local));
      }
      result.fetched.push_back(f.name);
    } catch (const std::exception& e) {
      result.problems.push_back(fmt::format("{}:{}/{} not copied: {}", s.describe(), dir, f.name, e.what()));
    }
  }
  return result;
}

void remove_remote_dir(ocs::SshSession& s, const std::string& dir) {
  check_remote_dir(s, dir);
  auto r = s.exec("rm -rf -- " + sh_word(dir), kRemoteTimeout);
  if (r.exit_status != 0) throw Error(fmt::format("{}: rm -rf {} failed: {}", s.describe(), dir, last_line(r.err)));
}

}  // namespace ocslab::runner
