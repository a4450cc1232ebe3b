// Private to the control plane: an unreachable switch (fault injection). While the gate is
// closed, the bytes a client sends reach no protocol session: each connection holds them, in
// order, and hands them on when the gate opens, as if the network had delayed them. Replies
// to what arrived before keep going out; new connections are accepted and stay silent.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "ocslab/emulator/protocol_session.h"

namespace ocslab::emu {

// Shared by every session of one control plane; used only on the emulator's loop thread.
struct ControlGate {
  std::chrono::steady_clock::time_point closed_until{};
  bool closed() const { return std::chrono::steady_clock::now() < closed_until; }
};

// A protocol session behind the gate: forwards to `inner` when the gate is open.
class GatedSession final : public ProtocolSession {
 public:
  GatedSession(std::unique_ptr<ProtocolSession> inner, std::shared_ptr<ControlGate> gate, boost::asio::io_context& io,
               SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config);
  void on_open() override { inner_->on_open(); }
  void on_bytes(std::string_view bytes) override;
  void closed() override;

 private:
  void wait_for_gate();  // arms the timer for the gate's opening
  void flush();

  std::unique_ptr<ProtocolSession> inner_;
  std::shared_ptr<ControlGate> gate_;
  boost::asio::steady_timer timer_;
  std::string held_;  // bytes that arrived while the gate was closed, in order
  bool waiting_ = false;
};

}  // namespace ocslab::emu
