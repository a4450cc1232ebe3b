// A run's scratch folder on a lab host (the phase workload's ranks write their files there):
// made by `mktemp -d` on the host, so its name is new and it is the SSH user's own, mode 0700;
// checked to still be that folder (not a symlink) before anything is read from it or it is
// removed; removed only after every file fetched from it was verified.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::ocs {
class SshSession;
}

namespace ocslab::runner {

// "/tmp/ocslab-phase-RUN-MODE": run id and mode with every character but [A-Za-z0-9._-]
// replaced by '_', so the name needs no quoting and mktemp's answer can be checked exactly.
std::string remote_dir_prefix(const std::string& run_id, const std::string& mode);

// The shell command that makes the folder (mktemp -d PREFIX.XXXXXXXXXX) and prints its path.
std::string mktemp_command(const std::string& prefix);

// mktemp's output checked: one line, exactly PREFIX "." and 10 characters of [A-Za-z0-9];
// returns the path. Throws Error quoting the output otherwise.
std::string parse_mktemp_output(const std::string& out, const std::string& prefix);

// Makes the folder on the host `s` reaches and writes `name` with `text` into it; returns the
// folder's path. Throws Error naming the host when mktemp or the write fails.
std::string make_remote_dir(ocs::SshSession& s, const std::string& prefix, const std::string& name,
                            const std::string& text);

// The shell command that exits 0 when DIR is a folder, not a symlink, owned by the SSH user;
// else it prints "DIR is a symlink" (or what else is wrong) on standard error and exits 3.
std::string check_dir_command(const std::string& dir);

// Throws Error "HOST: DIR is a symlink; refusing to use it" (or what else is wrong) unless dir
// is a folder, not a symlink, owned by the SSH user.
void check_remote_dir(ocs::SshSession& s, const std::string& dir);

struct RemoteFile {
  std::string name;
  uint64_t size = 0;
};
// The shell command listing "NAME SIZE" for each of `names` that is a regular file in DIR
// (after the check_dir_command checks).
std::string sizes_command(const std::string& dir, const std::vector<std::string>& names);
// Its output parsed; throws Error on a line it did not write, and on a name that is not a plain
// file name (plain_file_name_problem), quoting it with control bytes as \xHH.
std::vector<RemoteFile> parse_sizes(const std::string& out);

// Empty when `name` can only name a file inside a folder (it is joined to a local folder's path);
// else why not: empty, longer than 255 bytes, "." or "..", a '/', a control character or NUL.
std::string plain_file_name_problem(std::string_view name);

struct FetchResult {
  std::vector<std::string> fetched;   // names copied and verified
  std::vector<std::string> problems;  // a file that could not be copied or verified, named
  bool verified() const { return problems.empty(); }
};
// Copies each of `names` present in the remote folder to local_dir/NAME, each written, fsynced
// and closed without error and its size on disk equal to its size on the host. Throws Error when
// the folder itself is refused (check_remote_dir) or cannot be listed, and, naming the host and
// the name, when the listing names anything but one of `names` (nothing is copied then).
FetchResult fetch_verified(ocs::SshSession& s, const std::string& dir, const std::vector<std::string>& names,
                           const std::string& local_dir);

// Removes the folder (rm -rf) after check_remote_dir; throws Error when refused or rm fails.
void remove_remote_dir(ocs::SshSession& s, const std::string& dir);

}  // namespace ocslab::runner
