// Reading a whole file: the one helper the libraries and the tests share.
#pragma once

#include <string>

namespace ocslab {

// The file's bytes; throws Error "cannot read PATH: <reason>" when it cannot be opened or read.
std::string read_file(const std::string& path);

// The file's bytes, or "" when it cannot be opened: for what may be gone or not yet written
// (a /proc entry of a process that ended, a log a child has not started).
std::string read_file_or_empty(const std::string& path);

}  // namespace ocslab
