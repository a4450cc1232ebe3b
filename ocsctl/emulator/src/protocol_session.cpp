#include "ocslab/emulator/protocol_session.h"

namespace ocslab::emu {

ProtocolSession::ProtocolSession(SwitchModel& model, GroundTruth& truth, ControlPlaneConfig config, SendFn send,
                                 CloseFn close, std::string source)
    : model_(model), truth_(truth), config_(std::move(config)), send_(std::move(send)), close_(std::move(close)),
      source_(std::move(source)) {}

ProtocolSession::~ProtocolSession() = default;

void ProtocolSession::closed() { closed_ = true; }

void ProtocolSession::send(std::string bytes) {
  if (!closed_ && send_ && !bytes.empty()) send_(std::move(bytes));
}

void ProtocolSession::request_close() {
  if (closed_) return;
  closed_ = true;  // nothing more is read or sent once the session asked to end
  if (close_) close_();
}

void ProtocolSession::record_command(const std::string& subject) { truth_.record(source_, subject, "command", 1, "event"); }

void ProtocolSession::record_ack(const std::string& subject, bool ok) {
  truth_.record(source_, subject, "ack", ok ? 1 : 0, "bool");
}

}  // namespace ocslab::emu
