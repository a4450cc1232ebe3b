// The OCS emulator assembled from its parts: switch model, control plane, data plane, one NIC
// link model per attached NIC, and the ground-truth recorder, all driven by one Asio event
// loop on a thread of its own. `ocsctl emulate` and the virtual lab run this.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "ocslab/emulator/control_plane.h"
#include "ocslab/emulator/data_plane.h"
#include "ocslab/emulator/ground_truth.h"
#include "ocslab/emulator/lab_config.h"
#include "ocslab/emulator/nic_link_model.h"
#include "ocslab/emulator/switch_model.h"

namespace ocslab::emu {

class Emulator {
 public:
  explicit Emulator(EmulatorConfig config);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  // Starts the data plane, takes every NIC link down (no circuit is lit yet), starts the
  // control plane and the event loop. Throws ocslab::Error after undoing what it started.
  void start();
  void stop();  // idempotent

  const EmulatorConfig& config() const { return config_; }
  GroundTruth& truth() { return truth_; }
  BoundPorts ports() const;
  std::optional<int> events_port() const { return events_port_; }
  std::string known_hosts(const std::string& host, int port) const;
  DataPlane* data_plane() { return data_plane_.get(); }

  // Runs fn on the event loop and waits for its result (the model is not thread-safe).
  template <class F>
  auto call(F&& fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::forward<F>(fn));
    auto fut = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return fut.get();
  }
  // The model, for use inside call().
  SwitchModel& model() { return *model_; }

  // Replaces the switching time and/or every NIC's link model (what `update` holds) on the
  // event loop: circuit moves and light changes that start afterwards use the new timing,
  // those under way keep their draw. Each change is a ground-truth row (signals
  // switching_mean on the switch, firmware_up_mean per NIC, in ms). config() follows it.
  // update.hold_down, when given, is the set of NICs held down from now on (the others are
  // released; NicLinkModel::set_held_down, ground-truth signal held_down per NIC that
  // changes). update.dark_ports, when given, is the set of switch ports dark from now on: their
  // shutters are closed (SwitchModel::set_shutter, ground-truth signal shutter_closed per port
  // that changes) and those this channel closed before and not listed are opened.
  // update.unreachable_ms makes the control plane unreachable that long from now
  // (ControlPlane::silence; nothing without a control plane). update.dark_spell closes its
  // ports' shutters now and opens them again after exactly its ms on the loop's steady clock
  // (ground truth: shutter_closed 1 / 0 per port, and `dark_spell` with the ms on the switch).
  // Throws Error naming a hold_down NIC or a dark port the emulator does not have, or a spell's
  // port that is dark already (by dark_ports, a spell still under way or the control plane),
  // changing nothing.
  void retime(const TimingUpdate& update);

 private:
  void start_events_server();
  void apply_timing(const TimingUpdate& update);  // on the loop thread
  void apply_holds();                             // held_down_ to every NIC, on the loop thread
  void apply_dark_ports(const std::vector<Port>& dark);  // shutters, on the loop thread
  void check_dark_spell(const DarkSpell& spell) const;  // on the loop thread
  void apply_dark_spell(const DarkSpell& spell);        // on the loop thread

  EmulatorConfig config_;
  boost::asio::io_context io_;
  GroundTruth truth_;
  std::unique_ptr<SwitchModel> model_;
  std::unique_ptr<DataPlane> data_plane_;
  std::vector<std::unique_ptr<NicLinkModel>> links_;
  std::vector<std::string> held_down_;  // the NICs the last retime held down (by name)
  std::vector<Port> dark_ports_;        // the ports the last retime darkened
  std::vector<Port> spell_ports_;       // the ports of the dark spells under way
  std::vector<std::unique_ptr<boost::asio::steady_timer>> spell_timers_;
  std::unique_ptr<ControlPlane> control_;
  struct EventsServer;
  std::unique_ptr<EventsServer> events_;
  std::optional<int> events_port_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread loop_;
  bool started_ = false;
};

}  // namespace ocslab::emu
