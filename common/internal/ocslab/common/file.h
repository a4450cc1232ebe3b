// Reading and writing whole files: the helpers the libraries and the tests share.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ocslab {

// The file's bytes; throws Error "cannot read PATH: <reason>" when it cannot be opened or read.
std::string read_file(const std::string& path);

// The file's bytes, or "" when it cannot be opened: for what may be gone or not yet written
// (a /proc entry of a process that ended, a log a child has not started).
std::string read_file_or_empty(const std::string& path);

// Who may have access to a file read_checked_file accepts.
enum class FileAccess {
  kAny,        // any owner and mode
  kOwnerOnly,  // owned by this process's user or by root, no access for group or others (a secret)
};

// A file that must be what it claims: opened without following a final symbolic link
// (O_NOFOLLOW), then checked on the open descriptor (fstat), so what is checked is what is
// read. Returns nullopt when path does not exist. Throws Error starting with the file's name
// ("<what> '<path>'", or the path alone when what is empty) and saying what is wrong: a
// symbolic link, not a regular file, larger than max_bytes, and for kOwnerOnly owned by
// another user, or with access for group or others (naming `chmod 600 PATH`).
std::optional<std::string> read_checked_file(const std::string& path, const std::string& what, size_t max_bytes,
                                             FileAccess access);

// Replaces path with text atomically, mode 0600 from the start: a temporary file next to it is
// created with O_EXCL | O_NOFOLLOW and mode 0600, written, fsynced and renamed over path, so a
// reader sees the old file or the new one and nobody else can read either. Throws SystemError
// naming the file.
void write_private_file(const std::string& path, std::string_view text);

}  // namespace ocslab
