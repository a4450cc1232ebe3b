// Typed failures of OCS control. Every message names the switch (URL without secrets) and,
// where one was involved, the command and the switch's own reply text.
#pragma once

#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::ocs {

class OcsError : public Error {
 public:
  using Error::Error;
};

// The switch refused a command (TL1 DENY, NETCONF rpc-error, SCPI error queue entry).
class DenyError : public OcsError {
 public:
  DenyError(const std::string& what, std::string code, std::string text)
      : OcsError(what), code_(std::move(code)), text_(std::move(text)) {}
  const std::string& code() const { return code_; }  // IDNV, IIAC, invalid-value, -222, ...
  const std::string& text() const { return text_; }  // the switch's own message

 private:
  std::string code_;
  std::string text_;
};

// The connection could not be made or was lost; the next driver call reconnects.
class ConnectionError : public OcsError {
 public:
  using OcsError::OcsError;
};

// No reply within the deadline; the connection is dropped and the next call reconnects.
class TimeoutError : public OcsError {
 public:
  using OcsError::OcsError;
};

// The switch sent something the protocol does not allow (garbage, truncated frame).
class ProtocolError : public OcsError {
 public:
  using OcsError::OcsError;
};

// A request touched a port outside the allow-list or outside the switch; nothing was sent.
class PortError : public OcsError {
 public:
  using OcsError::OcsError;
};

// A reconfiguration failed part-way: what was verifiably done before the failure.
class ApplyError : public OcsError {
 public:
  ApplyError(const std::string& what, std::vector<Circuit> made, std::vector<Circuit> not_made,
             std::vector<Circuit> removed, bool state_known)
      : OcsError(what),
        made_(std::move(made)),
        not_made_(std::move(not_made)),
        removed_(std::move(removed)),
        state_known_(state_known) {}
  const std::vector<Circuit>& made() const { return made_; }
  const std::vector<Circuit>& not_made() const { return not_made_; }
  const std::vector<Circuit>& removed() const { return removed_; }
  bool state_known() const { return state_known_; }  // false: the read-back failed too

 private:
  std::vector<Circuit> made_, not_made_, removed_;
  bool state_known_;
};

// The exit code of a failure of OCS control, as docs/exit-codes.md maps them for every program
// that talks to a switch: refused 3, a bad or disallowed port 2, a reconfiguration failed
// part-way 5, not reached / lost / no reply / garbage 4.
int exit_code_of(const OcsError& e);

}  // namespace ocslab::ocs
