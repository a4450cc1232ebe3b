// Folders and files a program keeps for itself (the agent's runtime folder, lock, log and
// spool, the runner's copies of remote files): a folder is used only when it is this user's own and not a symlink, and a file is
// opened without following a symlink someone may have planted at its name. Nothing is ever
// chmod'ed or chown'ed: what is wrong is named, and the caller refuses to go on.
#pragma once

#include <sys/types.h>

#include <string>

namespace ocslab {

enum class DirPolicy {
  kPrivate,  // mode exactly 0700: a folder at a predictable name (/tmp/NAME-UID)
  kOwned,    // neither group nor others may write into it (/run/NAME, /var/spool/NAME, --spool-dir)
};

// Makes `path` if it is missing (its parents as create_directories would, the folder itself
// with mkdir mode 0700), then opens it with O_DIRECTORY|O_NOFOLLOW and checks on that
// descriptor that it is a directory, owned by this process's effective uid, with the mode
// `policy` asks. Throws Error "PATH: <what is wrong>; refusing to use it" otherwise (a symlink,
// another owner, a mode that lets others in).
void ensure_own_dir(const std::string& path, DirPolicy policy);

// open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode) for a regular file; returns the descriptor
// (the caller closes it). With O_CREAT|O_EXCL in flags the file must be new. A symlink at
// `path` is refused ("PATH is a symlink (to TARGET); refusing to follow it"), and so is
// anything but a regular file (a FIFO would block, a device would be written); any other
// failure throws SystemError naming `what` and the path.
int open_no_follow(const std::string& path, int flags, mode_t mode, const std::string& what);

// Writing a file that must be whole or absent: write_file_atomic (durable_file.h).

}  // namespace ocslab
