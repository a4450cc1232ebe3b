// One NETCONF session of the emulated Polatis switch (docs/protocols.md#netconf), independent of its
// SSH channel: hello exchange, end-of-message or chunked framing, get / get-config /
// edit-config / close-session on the optical-switch model, standard rpc-errors. RPCs run one
// at a time; an edit-config replies after the mirrors settle when ack_after_settle is set.
// Runs only on the emulator's event loop.
#pragma once

#include <pugixml.hpp>

#include <atomic>
#include <string>

#include "ocslab/emulator/protocol_session.h"
#include "ocslab/ocsctl/netconf_codec.h"

namespace ocslab::emu {

class NetconfSession final : public ProtocolSession {
 public:
  static constexpr size_t kMaxMessage = size_t{16} << 20;
  static constexpr size_t kMaxPending = size_t{64} << 20;  // unread input while an edit settles

  NetconfSession(SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config, SendFn send,
                 CloseFn close = {});

  void on_open() override;  // sends the server hello
  void on_bytes(std::string_view bytes) override;
  ocs::Framing framing() const { return framing_; }
  const std::string& session_id() const { return session_id_; }

 private:
  void pump();
  // Returns false when the reply comes later (edit-config waiting for the mirrors).
  bool handle(const std::string& raw);
  void handle_hello(const std::string& raw);
  std::string get(pugi::xml_node op, bool with_state);
  // Applies the edit or throws; `done` set when the reply must wait for the mirrors.
  bool edit_config(pugi::xml_node op, const std::string& message_id);
  void reply(const std::string& xml);
  void fail_and_close(const std::string& message_id, const std::string& tag, const std::string& text);

  ocs::FrameDecoder decoder_{ocs::Framing::kEndOfMessage, kMaxMessage};
  ocs::Framing framing_ = ocs::Framing::kEndOfMessage;
  std::string list_name_;
  std::string session_id_;
  bool hello_done_ = false;
  bool busy_ = false;
};

}  // namespace ocslab::emu
