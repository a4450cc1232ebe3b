// Test rig for the phase-control tests (header only: its users link ocslab_emulator and
// ocslab_phase): the project's OCS emulator (switch model + TL1 control plane) on a real
// io_context thread, listening on loopback; TL1 drivers and placed rails (orchestrators) over
// it; the emulator's ground truth per port; and the options of a controller over such rails.
#pragma once

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ocslab/emulator/control_plane.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/phase/controller.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/phase/shim.h"
#include "ocslab/phase/topology.h"

namespace phase_test {

using namespace ocslab;
using namespace std::chrono_literals;

inline emu::SwitchParams phase_switch(double switching_ms, int ports = 64) {
  emu::SwitchParams p;
  p.name = "EMU-PHASE";
  p.ingress_ports = ports;
  p.egress_ports = ports;
  p.switching = emu::Distribution::fixed(switching_ms);
  p.ack_after_settle = true;  // COMPLD only once the mirrors settled: a slow switch is a slow ACK
  return p;
}

struct Lab {
  explicit Lab(emu::SwitchParams params = phase_switch(1))
      : model(io, std::move(params), truth), cp(io, model, truth, tl1_only()) {
    cp.start();
    loop = std::thread([this] { io.run(); });
  }
  ~Lab() {
    cp.stop();
    work.reset();
    io.stop();
    loop.join();
  }
  static emu::ControlPlaneConfig tl1_only() {
    emu::ControlPlaneConfig c;
    c.tl1 = emu::ListenAddress{"127.0.0.1", 0};
    return c;
  }
  std::string url() const { return "tl1://admin@127.0.0.1:" + std::to_string(*cp.ports().tl1); }
  std::unique_ptr<ocs::OcsDriver> driver(std::optional<ocs::PortSet> allow = {},
                                         std::chrono::milliseconds reply_timeout = 5000ms) const {
    ocs::DriverOptions o;
    o.password = "root";
    o.reply_timeout = reply_timeout;
    o.connect_timeout = 5000ms;
    o.allow = std::move(allow);
    return ocs::make_driver(ocs::SwitchUrl::parse(url()), std::move(o));
  }
  // n slots: ingress first..first+n-1, egress half+first.. (an N x N switch: egress = N + port).
  std::vector<phase::Slot> slots(int first, int n) const {
    std::vector<phase::Slot> out;
    for (int i = 0; i < n; ++i) out.push_back({first + i, model.params().ingress_ports + first + i});
    return out;
  }
  // A rail over this switch (slots first..first+ranks-1) with the job wired at `initial`.
  std::shared_ptr<phase::Orchestrator> rail(const phase::JobLayout& layout, const phase::TopoId& initial, int first = 1,
                                            const std::string& name = "rail0") const {
    auto o = std::make_shared<phase::Orchestrator>(name, slots(first, layout.ranks()), driver());
    o->add_job(layout, initial);
    return o;
  }
  std::vector<ocs::Circuit> circuits() {
    std::packaged_task<std::vector<ocs::Circuit>()> task([this] { return model.circuits(); });
    auto fut = task.get_future();
    boost::asio::post(io, [&task] { task(); });
    return fut.get();
  }
  // The same, sorted (ingress, then egress): comparable with a list written in a test.
  std::vector<ocs::Circuit> sorted_circuits() {
    auto v = circuits();
    std::sort(v.begin(), v.end());
    return v;
  }
  // Every port the switch moved a mirror for or removed a circuit on since sample index `from`
  // (ground truth subjects "IN-OUT" for switch_start, "IN" for circuit_removed).
  std::set<int> ports_touched(size_t from = 0) const {
    std::set<int> out;
    auto all = truth.samples();
    for (size_t i = from; i < all.size(); ++i) {
      const auto& s = all[i];
      if (s.source != "switch") continue;
      if (s.signal == "switch_start") {
        auto dash = s.subject.find('-');
        out.insert(std::stoi(s.subject.substr(0, dash)));
        out.insert(std::stoi(s.subject.substr(dash + 1)));
      } else if (s.signal == "circuit_removed") {
        out.insert(std::stoi(s.subject));
      }
    }
    return out;
  }
  size_t mark() const { return truth.samples().size(); }

  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  emu::GroundTruth truth{"EMU-PHASE"};
  emu::SwitchModel model;
  emu::ControlPlane cp;
  std::thread loop;
};

// A controller's options for one job over these rails (the other options at their defaults).
inline phase::ControllerOptions controller_options(const phase::JobLayout& layout,
                                                   std::vector<std::shared_ptr<phase::Orchestrator>> rails) {
  phase::ControllerOptions co;
  co.layout = layout;
  co.rails = std::move(rails);
  return co;
}

// The shims of a one-group job: ranks 0..n-1 of `job` in one group "dp0" (kind dp) on the
// controller at `port`, each asking before every op (skip_unchanged off, so every shim reads
// what the controller said). step(i) runs op i (an 8-byte allreduce) on every rank at once.
struct RingShims {
  RingShims(int port, const std::string& job, int n) {
    phase::ShimOptions so;
    so.port = port;
    so.job = job;
    so.world = n;
    so.skip_unchanged = false;
    std::vector<int> members;
    for (int r = 0; r < n; ++r) members.push_back(r);
    for (int r = 0; r < n; ++r) {
      so.rank = r;
      shims.push_back(std::make_unique<phase::Shim>(so));
      shims.back()->add_group("dp0", "dp", members);
    }
  }
  void step(int index) {
    std::vector<std::thread> t;
    for (auto& s : shims) {
      t.emplace_back([&s, index] {
        s->pre_communication({"dp0", "allreduce", 8, index});
        s->post_communication({"dp0", "allreduce", 8, index});
      });
    }
    for (auto& x : t) x.join();
  }
  void close() {
    for (auto& s : shims) s->close();
  }
  std::vector<std::unique_ptr<phase::Shim>> shims;
};

// The ranks of a one-stage DP=2 x CP=2 job (rank r: dp = r % 2, cp = r / 2), one thread each,
// each with its own shim on the controller at `port` and its two groups added: CP group
// "cp<dp>s0" over {dp, dp + 2}, DP group "dp<2cp>s0" over {2cp, 2cp + 1}. body(r, shim, cp_group,
// dp_group) runs the rank's steps; an exception becomes "rank r: what" in `errors`.
template <class Body>
void run_cp_dp_ranks(const phase::JobLayout& layout, int port, phase::ShimMode mode, int profile_steps,
                     std::vector<std::string>& errors, Body body) {
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < layout.ranks(); ++r) {
    threads.emplace_back([&, r] {
      try {
        phase::ShimOptions o;
        o.port = port;
        o.job = layout.job;
        o.rank = r;
        o.world = layout.ranks();
        o.mode = mode;
        o.profile_steps = profile_steps;
        o.ack_wait = std::chrono::milliseconds(20000);
        phase::Shim shim(o);
        const int dp = r % 2, cp = r / 2;
        const auto cp_group = fmt::format("cp{}s0", dp), dp_group = fmt::format("dp{}s0", 2 * cp);
        shim.add_group(cp_group, "cp", {dp, dp + 2});
        shim.add_group(dp_group, "dp", {2 * cp, 2 * cp + 1});
        body(r, shim, cp_group, dp_group);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors.push_back(fmt::format("rank {}: {}", r, e.what()));
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace phase_test
