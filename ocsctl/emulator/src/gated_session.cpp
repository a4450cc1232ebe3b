#include "gated_session.h"

namespace ocslab::emu {

GatedSession::GatedSession(std::unique_ptr<ProtocolSession> inner, std::shared_ptr<ControlGate> gate,
                           boost::asio::io_context& io, SwitchModel& model, GroundTruth& truth,
                           const ControlPlaneConfig& config)
    : ProtocolSession(model, truth, config, nullptr, nullptr, "gate"),
      inner_(std::move(inner)),
      gate_(std::move(gate)),
      timer_(io) {}

void GatedSession::on_bytes(std::string_view bytes) {
  if (is_closed()) return;
  if (!gate_->closed() && held_.empty()) {
    inner_->on_bytes(bytes);
    return;
  }
  held_.append(bytes);  // behind what is held already: order is kept
  wait_for_gate();
}

void GatedSession::wait_for_gate() {
  if (waiting_) return;
  waiting_ = true;
  timer_.expires_at(gate_->closed_until);
  std::weak_ptr<bool> alive = this->alive();
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;
    waiting_ = false;
    flush();
  });
}

void GatedSession::flush() {
  if (is_closed()) return;
  if (gate_->closed()) {  // closed again for longer meanwhile
    wait_for_gate();
    return;
  }
  std::string bytes;
  bytes.swap(held_);
  inner_->on_bytes(bytes);
}

void GatedSession::closed() {
  ProtocolSession::closed();
  held_.clear();
  timer_.cancel();
  inner_->closed();
}

}  // namespace ocslab::emu
