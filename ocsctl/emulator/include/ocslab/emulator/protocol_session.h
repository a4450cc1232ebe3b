// What every emulated protocol session (TL1, SCPI, NETCONF) shares: the model it drives, the
// ground-truth records of each request and completion, and the callbacks to its transport.
// Sessions are transport-independent state machines that run only on the emulator's loop.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "ocslab/emulator/ground_truth.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/emulator/switch_model.h"

namespace ocslab::emu {

// Light-change fan-out that sessions can leave. SwitchModel's observer list only grows, so
// the control plane registers once with the model and routes through this registry.
class LightEvents {
 public:
  int add(SwitchModel::LightFn fn) {
    fns_[next_] = std::move(fn);
    return next_++;
  }
  void remove(int id) { fns_.erase(id); }
  void publish(Port egress, bool lit, double dbm) {
    // Copy: a subscriber may close (and unsubscribe) its session while being called.
    auto fns = fns_;
    for (auto& [id, fn] : fns) fn(egress, lit, dbm);
  }
  size_t size() const { return fns_.size(); }

 private:
  std::map<int, SwitchModel::LightFn> fns_;
  int next_ = 1;
};

class ProtocolSession {
 public:
  using SendFn = std::function<void(std::string)>;
  using CloseFn = std::function<void()>;

  // close: asks the transport to end the connection after what was sent (may be empty).
  ProtocolSession(SwitchModel& model, GroundTruth& truth, ControlPlaneConfig config, SendFn send, CloseFn close,
                  std::string source);
  virtual ~ProtocolSession();
  ProtocolSession(const ProtocolSession&) = delete;
  ProtocolSession& operator=(const ProtocolSession&) = delete;

  virtual void on_open() {}
  virtual void on_bytes(std::string_view bytes) = 0;
  // The transport is gone: nothing is sent any more, pending completions are dropped.
  virtual void closed();
  bool is_closed() const { return closed_; }

 protected:
  void send(std::string bytes);
  void request_close();
  void record_command(const std::string& subject);
  void record_ack(const std::string& subject, bool ok);
  // A guard for callbacks that may run after the session is gone (mirror settle).
  std::weak_ptr<bool> alive() const { return alive_; }

  SwitchModel& model_;
  GroundTruth& truth_;
  // A copy: a session may outlive the control plane by a few loop turns while it closes.
  const ControlPlaneConfig config_;

 private:
  SendFn send_;
  CloseFn close_;
  std::string source_;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ocslab::emu
