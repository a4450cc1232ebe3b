// NIC link model: what a host NIC's firmware does when light comes and goes at its receive
// fibre. Loss of light takes the link down after a short LOS delay; light back brings it up
// after a firmware link-up delay (about 6 s with auto-negotiation and 3 s without on a
// ConnectX-6 Dx, longer under rapid successive reconfigurations; docs/protocols.md). Runs on
// the emulator's Asio event loop.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ocslab/emulator/distribution.h"
#include "ocslab/emulator/ground_truth.h"
#include "ocslab/emulator/link_driver.h"

namespace ocslab::emu {

struct NicLinkParams {
  double los_ms = 1.0;               // light lost -> link down
  Distribution firmware_up;          // light back -> link up
  // Rapid successive reconfigurations: a light return within rapid_window_ms of the previous
  // link-up adds a draw of rapid_extra to the firmware delay.
  double rapid_window_ms = 0;
  Distribution rapid_extra;
  // Ceiling on the whole light-back -> link-up delay (0: none): the rapid rule must not push
  // a draw past what the hardware was ever seen to take (about 10 s, docs/protocols.md).
  double max_up_ms = 0;

  // Presets: "ideal" (0), "cx6dx-autoneg" (about 6 s), "cx6dx-no-autoneg" (about 3 s).
  // Throws ocslab::Error listing the known names.
  static NicLinkParams preset(const std::string& name);
  static std::vector<std::string> preset_names();
};

class NicLinkModel {
 public:
  // on_link: told every link change (the data plane); driver: the carrier actuator.
  NicLinkModel(boost::asio::io_context& io, std::string nic_name, NicLinkParams params,
               std::unique_ptr<LinkDriver> driver, GroundTruth& truth, std::function<void(bool)> on_link,
               uint64_t seed);
  ~NicLinkModel();

  // Light at this NIC's receive fibre changed. Call on the io_context thread.
  void on_light(bool lit);
  bool link_up() const { return link_up_; }
  bool light() const { return light_; }
  const std::string& name() const { return name_; }
  const NicLinkParams& params() const { return params_; }
  // The link model of light changes from now on; a transition already pending keeps its
  // delay. Call on the io_context thread.
  void set_params(const NicLinkParams& p) { params_ = p; }

  // Sets the initial state without delays (at emulator start). Call on the io_context thread.
  void force(bool up);

  // Fault injection: a link held down is never raised by the firmware. While held, light
  // returning leaves a down link down (no firmware delay is drawn) and a link-up already
  // pending is cancelled; light loss still takes an up link down after LOS (a link that is up
  // when the hold starts stays up until then). Releasing it with light present brings the link
  // up after a firmware delay drawn at the release, as if the light had just returned. Each
  // change is a ground-truth row (signal held_down, 1 / 0); setting the state it already has
  // does nothing. Call on the io_context thread.
  void set_held_down(bool held);
  bool held_down() const { return held_down_; }

 private:
  void apply(bool up);
  void schedule(double delay_ms, bool up);
  void start_link_up();  // draws the firmware delay and schedules the link-up

  std::string name_;
  NicLinkParams params_;
  std::unique_ptr<LinkDriver> driver_;
  GroundTruth& truth_;
  std::function<void(bool)> on_link_;
  std::mt19937_64 rng_;
  boost::asio::steady_timer timer_;
  bool light_ = false;
  bool link_up_ = false;
  bool held_down_ = false;
  int64_t last_up_mono_ns_ = 0;
  // Bumped whenever the pending transition is superseded: a timer that already fired and
  // queued its handler cannot be cancelled, so the handler checks it is still current.
  uint64_t generation_ = 0;
  // Handlers hold a weak reference, so one that runs after the model is gone does nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ocslab::emu
