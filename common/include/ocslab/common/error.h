// The one exception root of ocslab: every failure a caller cannot continue from derives
// from ocslab::Error and carries the offending input (file:line, port, the line received).
#pragma once

#include <stdexcept>
#include <string>

namespace ocslab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A configuration or input file is malformed; the message starts with "file:line:col: ".
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A system call failed; the message names the call and what it operated on.
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace ocslab
