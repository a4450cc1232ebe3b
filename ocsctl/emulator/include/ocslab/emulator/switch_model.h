// The emulated switch's state and physics: circuits, mirror switching time, light at every
// port, shutters. One instance is shared by every control-plane session (TL1, NETCONF, SCPI)
// and drives the data plane and NIC link models through observers. It lives on the
// emulator's Asio event loop: call it only from that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ocslab/emulator/distribution.h"
#include "ocslab/emulator/ground_truth.h"
#include "ocslab/ocsctl/types.h"

namespace ocslab::emu {

using ocs::Circuit;
using ocs::Port;

struct SwitchParams {
  std::string name = "ocs";  // ground-truth host name
  std::string vendor = "POLATIS";
  std::string model = "6000";
  std::string serial = "OCSLAB-EMU-0001";
  std::string version = "ocslab-emulator";
  int ingress_ports = 32;  // N: ingress 1..N
  int egress_ports = 32;   // M: egress N+1..N+M
  Distribution switching = Distribution::fixed(25);
  bool ack_after_settle = true;  // false: the command returns before the mirrors settle
  bool blocking = false;         // true: every lit circuit goes dark while any mirror moves
  bool replace_patched = false;  // entering a patch on a patched port: replace, or refuse
  double insertion_loss_db = 1.5;
  double source_power_dbm = 0.0;  // light entering an ingress port (NIC transmit power)
  std::map<Port, double> source_power_by_port;
  double dark_floor_dbm = -60.0;  // what a monitor reads without light
  uint64_t seed = 1;

  // Presets (docs/protocols.md#switching-and-link-up-times): polatis-6000, mems-3d, liquid-crystal, rotor,
  // robotic-patch-panel. Throws ocslab::Error listing the known names.
  static SwitchParams preset(const std::string& name);
  static std::vector<std::string> preset_names();
};

// An error a control-plane session turns into its protocol's refusal.
struct ModelError {
  enum class Kind { kInvalidPort, kPortInUse, kBadRequest };
  Kind kind;
  std::string text;  // the device's message, e.g. "Invalid OXC port: 1000"
};

class SwitchModel {
 public:
  SwitchModel(boost::asio::io_context& io, SwitchParams params, GroundTruth& truth);

  const SwitchParams& params() const { return params_; }
  // The switching time of moves that start from now on; a move under way keeps its draw.
  void set_switching(const Distribution& d) { params_.switching = d; }
  int total_ports() const { return params_.ingress_ports + params_.egress_ports; }
  bool is_ingress(Port p) const { return p >= 1 && p <= params_.ingress_ports; }
  bool is_egress(Port p) const { return p > params_.ingress_ports && p <= total_ports(); }
  bool valid(Port p) const { return p >= 1 && p <= total_ports(); }

  // Makes circuits, all or nothing. `done` runs when every new circuit has settled (at once
  // when nothing moves). `origin` names the requester in the ground truth (e.g. "tl1").
  std::optional<ModelError> connect(const std::vector<Circuit>& circuits, std::function<void()> done);
  // Deletes every circuit with one of these ports at either end; empty = all circuits.
  std::optional<ModelError> disconnect(const std::vector<Port>& ports);
  // Circuits as configured (including those still switching).
  std::vector<Circuit> circuits() const;
  bool settled(Port ingress) const;

  double power_dbm(Port p) const;  // monitor reading: egress = arriving light, ingress = source
  bool lit(Port egress) const;

  std::optional<ModelError> set_shutter(const std::vector<Port>& ports, bool closed);
  bool shutter_closed(Port p) const { return closed_.count(p) != 0; }

  // Observers, called on the event-loop thread in the order things happen.
  using PathFn = std::function<void(Port ingress, std::optional<Port> egress)>;
  using LightFn = std::function<void(Port egress, bool lit, double dbm)>;
  void on_path(PathFn fn) { path_fns_.push_back(std::move(fn)); }
  void on_light(LightFn fn) { light_fns_.push_back(std::move(fn)); }

 private:
  struct Mirror {
    std::optional<Port> egress;  // configured target
    bool settled = false;
    uint64_t generation = 0;  // invalidates timers of superseded moves
    std::unique_ptr<boost::asio::steady_timer> timer;
  };

  // Runs `done` (posted to the loop) when the last move holding it settles or is superseded.
  struct Barrier {
    Barrier(boost::asio::io_context& i, std::function<void()> d) : io(i), done(std::move(d)) {}
    Barrier(const Barrier&) = delete;  // a copy would run `done` twice
    Barrier& operator=(const Barrier&) = delete;
    ~Barrier();
    boost::asio::io_context& io;
    std::function<void()> done;
  };
  void begin_move(Port ingress, std::optional<Port> egress, const std::shared_ptr<Barrier>& barrier);
  void settle(Port ingress, uint64_t generation);
  void refresh_light();
  // What may have changed since the last refresh_light(): the path of `ingress` and the light
  // at the egress it is configured to.
  void touch(Port ingress);
  std::optional<Port> lit_path(Port ingress) const;
  std::optional<Port> owner(Port egress) const;  // the ingress configured to it
  bool any_moving() const { return moving_ > 0; }
  double source_dbm(Port ingress) const;

  boost::asio::io_context& io_;
  SwitchParams params_;
  GroundTruth& truth_;
  std::mt19937_64 rng_;
  std::map<Port, Mirror> mirrors_;  // by ingress
  // Indexes kept in step with mirrors_, so that a change costs the same whatever the number of
  // circuits: a scan of mirrors_ for every egress port on every settle made a command of n
  // circuits cost n settles x ports x n (997 ms for 512 circuits on a 1024x1024 switch).
  std::map<Port, Port> owner_;  // egress -> the ingress configured to it
  size_t moving_ = 0;           // mirrors with a target that has not settled
  // Ports whose path (ingress) or light (egress) may have changed since the last announcement;
  // everything when the blocking fabric's "any mirror moving" flipped.
  std::set<Port> touched_in_, touched_out_;
  bool blocked_ = false;  // blocking && any_moving() at the last announcement
  std::set<Port> closed_;                      // shutters
  std::map<Port, std::optional<Port>> paths_;  // last path announced per ingress
  std::map<Port, bool> light_;                 // last light announced per egress
  std::vector<PathFn> path_fns_;
  std::vector<LightFn> light_fns_;
};

}  // namespace ocslab::emu
