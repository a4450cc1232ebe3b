// Which capture spools the agent keeps: a spool goes when its runner has confirmed the data
// (spool.delete), when it is older than the maximum age, or, oldest first, while all of them
// together are over the byte cap. Only files the agent names itself are touched
// (capture-<capture id>.jsonl, regular files, never a symlink), and never the running
// capture's. See docs/agent-protocol.md, "Spool retention".
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace ocslab::agent {

struct RetentionOptions {
  std::chrono::seconds max_age{std::chrono::hours(24 * 7)};
  uint64_t max_bytes = 4ULL << 30;  // all spools of this agent together
};

// "capture-" + capture + ".jsonl". capture must pass check_name (protocol.h).
std::string spool_file_name(const std::string& capture);
// A name spool_file_name makes.
bool is_spool_file_name(std::string_view name);

struct SpoolFile {
  std::string path;
  uint64_t bytes = 0;
  std::time_t mtime = 0;
};
// The spool files in dir (regular files with the agent's names; symlinks and anything else
// are left out), oldest first. Throws SystemError when dir cannot be read.
std::vector<SpoolFile> list_spool_files(const std::string& dir);

// Deletes dir/spool_file_name(capture) when it is a regular file: its size, or -1 when there
// is none. Throws Error naming the path when it is something else (a symlink: refused) or
// cannot be removed.
int64_t delete_spool_file(const std::string& dir, const std::string& capture);

struct RetentionReport {
  size_t deleted = 0;
  uint64_t freed_bytes = 0;
  std::vector<std::string> errors;  // files that could not be removed
};
// Deletes the spools older than max_age, then the oldest while the rest are over max_bytes;
// keep_path (the running capture's spool) is counted but never deleted.
RetentionReport enforce_retention(const std::string& dir, const RetentionOptions& options, const std::string& keep_path,
                                  std::time_t now);

// "90s", "30m", "12h", "7d" (a bare number: seconds); > 0. Throws Error naming the text.
std::chrono::seconds parse_age(const std::string& text, const std::string& what);
// "512M", "4G", "100K", "1T" (powers of 1024; a bare number: bytes); > 0. Throws Error.
uint64_t parse_size(const std::string& text, const std::string& what);

}  // namespace ocslab::agent
