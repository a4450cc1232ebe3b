// OcsDriver for NETCONF (RFC 6241/6242) over SSH with the Polatis optical-switch YANG model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/netconf_codec.h"
#include "ocslab/ocsctl/stream.h"

namespace ocslab::ocs {

class NetconfDriver final : public OcsDriver {
 public:
  NetconfDriver(SwitchUrl url, DriverOptions options);
  ~NetconfDriver() override;

  std::vector<std::string> render_commands(const MappingDiff& diff) const override;

 protected:
  void do_open() override;
  void do_close() override;
  SwitchInfo do_info() override;
  std::vector<Circuit> do_list() override;
  void do_connect(const std::vector<Circuit>& circuits) override;
  void do_disconnect(const std::vector<Port>& ports) override;
  std::vector<PortPower> do_power(const std::vector<Port>& ports) override;
  // One edit-config for all deletes and adds: the switch applies it atomically.
  void do_reconfigure(const MappingDiff& diff) override;

 private:
  // Sends one <rpc> and waits for its reply (notifications on the way go to emit_event).
  // command: the one-line description recorded in timing records and error messages.
  RpcReply rpc(const std::string& command, const std::string& body);
  void send(const std::string& xml);
  NetconfMessage read_message(Deadline deadline, const std::string& waiting_for);
  void edit_cross_connects(const std::vector<Circuit>& add, const std::vector<Port>& delete_ingress);

  std::unique_ptr<Stream> stream_;
  FrameDecoder decoder_;
  Hello server_hello_;
  std::string pair_name_ = "pair";
  uint64_t next_message_id_ = 1;
  bool broken_ = false;  // the session's state is unknown (timeout, lost, garbage): no close-session
};

}  // namespace ocslab::ocs
