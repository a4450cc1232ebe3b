// Shared secrets for the network surfaces a run opens (the phase controller's shim token):
// generated from the kernel's random source, read from a file whose owner and mode are
// checked on the open descriptor, and compared in constant time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ocslab {

// The most a secret file may hold; a token is far shorter.
inline constexpr size_t kMaxSecretBytes = 4096;

// `bytes` random bytes from getrandom(2), as lowercase hex (2 * bytes characters). Throws
// SystemError when the kernel cannot supply them.
std::string random_token(size_t bytes = 32);

// The secret in `path` with trailing whitespace removed. The file is opened with O_NOFOLLOW
// and checked on that descriptor: a regular file, owned by this process's effective user,
// no permission bits for group or others (0600 or 0400), at most kMaxSecretBytes, and not
// empty. Every refusal throws ocslab::Error naming the path and the rule it broke; `what`
// names the secret in the message ("controller token file").
std::string read_secret_file(const std::string& path, std::string_view what);

// Writes `secret` and a newline to a new file at `path`, mode 0600 (O_CREAT | O_EXCL |
// O_NOFOLLOW: never through or over something already there); checks the write and the
// close. Throws SystemError naming the path.
void write_secret_file(const std::string& path, std::string_view secret);

// True when a and b are equal, in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ocslab
