// OcsDriver for SCPI (Polatis :OXC command set, docs/protocols.md#scpi) over TCP. Set commands
// print nothing and return once the switch has accepted them, before it has switched, so each
// one travels with *OPC? (answered when switching has finished) and :SYST:ERR? in the same
// write: one round trip per command, acknowledged at the end of switching, and a refusal
// surfaces as a DenyError carrying the switch's code and text.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/scpi_codec.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

class ScpiDriver final : public OcsDriver {
 public:
  ScpiDriver(SwitchUrl url, DriverOptions options);
  ~ScpiDriver() override;

  std::vector<std::string> render_commands(const MappingDiff& diff) const override;

 protected:
  void do_open() override;
  void do_close() override;
  SwitchInfo do_info() override;
  std::vector<Circuit> do_list() override;
  void do_connect(const std::vector<Circuit>& circuits) override;
  void do_disconnect(const std::vector<Port>& ports) override;
  std::vector<PortPower> do_power(const std::vector<Port>& ports) override;

 private:
  // Sends a query and parses its one-line reply with `parse` before acknowledging it, so a
  // garbled reply is recorded as a failed call.
  template <class Parse>
  auto query(const std::string& command, Parse&& parse) -> decltype(parse(std::string_view{}));
  // Sends a set command plus *OPC? and :SYST:ERR?; returns once the switch reported the
  // operation complete and no error; throws DenyError when it reports an error.
  void execute(const std::string& command);
  std::string read_line(Deadline deadline, const std::string& command);
  Deadline reply_deadline() const { return Clock::now() + options().reply_timeout; }

  std::unique_ptr<Stream> stream_;
  std::string buffer_;  // bytes read past the last complete line
  std::optional<ScpiIdentity> fresh_identity_;  // from do_open, spares do_info a round trip
};

}  // namespace ocslab::ocs
