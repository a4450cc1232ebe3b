#include "ocslab/emulator/nic_link_model.h"

#include <algorithm>
#include <chrono>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/emulator/link_delivery.h"

namespace ocslab::emu {

namespace {

// Firmware link-up figures of a ConnectX-6 Dx with 100G LR4 optics, as seen in the Opus
// testbed (docs/protocols.md#switching-and-link-up-times): about 6 s with auto-negotiation,
// about 3 s without, up to 10 s under rapid successive reconfigurations. The spreads, floors
// and the rapid window are our choice (the source gives typical values only): sd 5 % of the
// mean, floors 5/6 of it, and a reconfiguration within 5 s of the previous link-up adds up to
// 4 s, capped at 10 s.
constexpr double kRapidWindowMs = 5000;
constexpr double kRapidExtraMaxMs = 4000;
constexpr double kWorstUpMs = 10000;
// Loss of signal: the PHY notices dark in well under a millisecond; the sources give no
// figure, so 1 ms (also the NicLinkParams default) stands for "immediately, but not in zero
// time".
constexpr double kLosMs = 1.0;

const std::vector<std::string> kPresetNames = {"ideal", "cx6dx-no-autoneg", "cx6dx-autoneg"};

}  // namespace

std::vector<std::string> NicLinkParams::preset_names() { return kPresetNames; }

NicLinkParams NicLinkParams::preset(const std::string& name) {
  NicLinkParams p;
  if (name == "ideal") {
    p.los_ms = 0;
    p.firmware_up = Distribution::fixed(0);
    return p;
  }
  if (name == "cx6dx-no-autoneg") {
    p.los_ms = kLosMs;
    p.firmware_up = Distribution::normal(3000, 150, 2500);
  } else if (name == "cx6dx-autoneg") {
    p.los_ms = kLosMs;
    p.firmware_up = Distribution::normal(6000, 300, 5000);
  } else {
    std::string known;
    for (const auto& n : kPresetNames) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown NIC link preset '" + name + "' (known: " + known + ")");
  }
  p.rapid_window_ms = kRapidWindowMs;
  p.rapid_extra = Distribution::uniform(0, kRapidExtraMaxMs);
  p.max_up_ms = kWorstUpMs;
  return p;
}

NicLinkModel::NicLinkModel(boost::asio::io_context& io, std::string nic_name, NicLinkParams params,
                           std::unique_ptr<LinkDriver> driver, GroundTruth& truth, std::function<void(bool)> on_link,
                           uint64_t seed)
    : name_(std::move(nic_name)),
      params_(std::move(params)),
      driver_(std::move(driver)),
      truth_(truth),
      on_link_(std::move(on_link)),
      rng_(seed),
      timer_(io) {}

NicLinkModel::~NicLinkModel() {
  ++generation_;
  timer_.cancel();
}

void NicLinkModel::force(bool up) {
  ++generation_;
  timer_.cancel();
  light_ = up;
  link_up_ = up;
  // At start a driver failure means the lab is miswired: let it reach the caller.
  if (driver_) driver_->set_link(up);
  if (on_link_) on_link_(up);
  truth_.record("emulator", name_, "light", up ? 1 : 0, "bool");
  truth_.record("emulator", name_, "link", up ? 1 : 0, "bool");
}

void NicLinkModel::on_light(bool lit) {
  if (lit == light_) return;
  light_ = lit;
  truth_.record("emulator", name_, "light", lit ? 1 : 0, "bool");
  // Whatever was pending answered the previous light state.
  ++generation_;
  timer_.cancel();
  if (!lit) {
    // A link still coming up simply never does (the cancel above); one that is up drops
    // after LOS.
    if (link_up_) schedule(params_.los_ms, false);
    return;
  }
  // Light back before LOS fired: the link never went down, nothing to do. A held link stays
  // down: its firmware never raises it.
  if (link_up_ || held_down_) return;
  start_link_up();
}

void NicLinkModel::set_held_down(bool held) {
  if (held == held_down_) return;
  held_down_ = held;
  truth_.record("emulator", name_, "held_down", held ? 1 : 0, "bool");
  if (held) {
    // A down link's pending transition is a link-up: the firmware never gets to raise it. An up
    // link's pending one is the LOS drop, which still happens.
    if (!link_up_) {
      ++generation_;
      timer_.cancel();
    }
    return;
  }
  if (light_ && !link_up_) start_link_up();
}

void NicLinkModel::start_link_up() {
  double ms = params_.firmware_up.sample_ms(rng_);
  if (params_.rapid_window_ms > 0 && last_up_mono_ns_ != 0 &&
      static_cast<double>(monotonic_ns() - last_up_mono_ns_) <= params_.rapid_window_ms * 1e6) {
    ms += params_.rapid_extra.sample_ms(rng_);
  }
  if (params_.max_up_ms > 0) ms = std::min(ms, params_.max_up_ms);
  // What the model drew, apart from when the event loop got to run the timer: on a loaded
  // host the `link` row lands a few ms after light + this.
  truth_.record("emulator", name_, "firmware_delay", ms, "ms");
  schedule(ms, true);
}

void NicLinkModel::schedule(double delay_ms, bool up) {
  if (delay_ms <= 0) {
    apply(up);
    return;
  }
  timer_.expires_after(std::chrono::nanoseconds(static_cast<int64_t>(delay_ms * 1e6)));
  uint64_t generation = generation_;
  std::weak_ptr<bool> alive = alive_;
  timer_.async_wait([this, generation, alive, up](const boost::system::error_code& ec) {
    if (ec || alive.expired() || generation != generation_) return;
    apply(up);
  });
}

void NicLinkModel::apply(bool up) {
  if (up == link_up_) return;
  link_up_ = up;
  if (up) last_up_mono_ns_ = monotonic_ns();
  if (driver_) {
    try {
      driver_->set_link(up);
    } catch (const std::exception& e) {
      // Thrown out of a timer handler this would stop the whole emulator loop.
      record_undelivered_link(truth_, name_, up, e);
    }
  }
  if (on_link_) on_link_(up);
  truth_.record("emulator", name_, "link", up ? 1 : 0, "bool");
}

}  // namespace ocslab::emu
