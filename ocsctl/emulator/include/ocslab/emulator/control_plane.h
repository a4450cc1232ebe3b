// The emulator's control plane: TL1 (raw TCP and SSH), NETCONF (SSH) and SCPI (TCP) servers,
// all serving one SwitchModel at once, with several concurrent sessions per protocol. Every
// command received and acknowledged is recorded in the ground truth. TCP protocols run on
// the emulator's Asio event loop; SSH sessions run libssh on their own threads and hand
// every request to that loop, so the model is only ever touched from one thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "ocslab/emulator/ground_truth.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/emulator/switch_model.h"

namespace ocslab::emu {

struct BoundPorts {
  std::optional<int> tl1, tl1_ssh, netconf, scpi;
};

class ControlPlane {
 public:
  ControlPlane(boost::asio::io_context& io, SwitchModel& model, GroundTruth& truth, ControlPlaneConfig config);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Binds every configured listener (port 0: any free port). Throws ocslab::Error naming the
  // protocol and address when one cannot be bound, after closing the others.
  void start();
  void stop();  // closes listeners and every session; joins SSH threads

  BoundPorts ports() const;
  // known_hosts line for the SSH listeners ("[127.0.0.1]:PORT ssh-ed25519 AAAA..."), so
  // clients verify the emulator's host key instead of trusting it blindly.
  std::string known_hosts(const std::string& host, int port) const;
  size_t open_sessions() const;
  // Fault injection, on the loop thread: the switch is unreachable for this long from now. What
  // clients send meanwhile reaches no session (each connection holds it, in order) and is
  // served when it ends; a longer spell extends one in progress. Ground truth: `unreachable`
  // 1 on `control` when it starts, 0 when it ends.
  void silence(std::chrono::milliseconds for_how_long);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ocslab::emu
