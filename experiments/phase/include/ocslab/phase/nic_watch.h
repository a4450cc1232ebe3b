// Host-side failure detection for the phase controller: a NIC whose link stays down (as its
// host's probes see it: the kernel's carrier, or the NIC firmware's link state) while the rail's
// circuits to its slot are made. The switch sees light on both ends of such a circuit (the NIC's
// transmitter works, or the light is fine and the NIC never trains the link), so the power
// monitors of port_watch.h have nothing to report; only the host knows. A slot in use by a job
// whose NIC is down on any watched layer for `down_for`, counted from the later of the NIC's last
// down reading and the moment its current circuits were first seen made, is reported once, as a
// failure of the slot's ingress port, so that Controller::port_failed masks it and moves the rank
// onto a spare exactly as for a dark port. Circuits re-made (a new partner) start the count again;
// masked slots and slots without circuits are not judged.
//
// The readings come from outside (the runner feeds its host capture's carrier and firmware
// samples, on the runner's clock); the watch's thread judges them against the rail's circuits.
// A host's readings arrive late when its stream lags (a loaded host, a slow link): an "up" row may
// still be on its way when down_for has passed on the watch's clock. So a NIC's state is known
// only up to the newest sample heard from its host (heard(); a heartbeat probe keeps that fresh),
// and the down time counts to there, never to the watch's own now: a lagging stream delays a
// detection, it never invents one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ocslab/common/periodic.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/phase/port_watch.h"

namespace ocslab::phase {

// One slot's NIC as its host names it. `interface` is the netdev the probes report (the NIC's own,
// which under a bond is the member, not the bond).
struct WatchedNic {
  Slot slot;
  std::string host;
  std::string nic;        // as in the lab or inventory
  std::string interface;  // as the host's probes name it
};

struct NicWatchOptions {
  // Down this long with its circuits made: failed. Above the NICs' link-up time after light (an
  // ideal NIC: none; a ConnectX with auto-negotiation: seconds), or every reconfiguration is one.
  std::chrono::milliseconds down_for{1000};
  std::chrono::milliseconds interval{10};  // how often the thread judges
};

// The evidence line of a NIC failure ("NIC h3:eth1 (interface eth1p): carrier down for 312 ms with
// its circuits made (3->20, 4->19)") and its parts read back (nullopt: not a NIC's evidence).
struct NicEvidence {
  std::string host, nic, layer;
};
std::string nic_evidence(const WatchedNic& n, const std::string& layer, double down_ms,
                         const std::vector<ocs::Circuit>& circuits);
std::optional<NicEvidence> parse_nic_evidence(const std::string& evidence);

class NicWatch {
 public:
  using OnFailure = std::function<void(const PortFailure&)>;  // on the watch's thread
  // Throws ocslab::Error for a non-positive down_for or interval, or a NIC on no slot of the rail.
  NicWatch(std::shared_ptr<Orchestrator> rail, std::vector<WatchedNic> nics, OnFailure on_failure,
           NicWatchOptions options = {});
  ~NicWatch();
  NicWatch(const NicWatch&) = delete;
  NicWatch& operator=(const NicWatch&) = delete;

  // A host's reading of one interface's link on one layer ("carrier", "firmware"), stamped on the
  // runner's realtime clock. Any thread; readings of interfaces not watched are ignored.
  void reading(const std::string& host, const std::string& interface, const std::string& layer, bool up,
               int64_t at_ns);
  // Any sample of the host's stream stamped at_ns (runner realtime): its readings are complete up
  // to there. Any thread; a time older than one already heard is ignored.
  void heard(const std::string& host, int64_t at_ns);

  void start();  // idempotent
  void stop();   // idempotent; joins the thread

  // One judgement at now_ns (runner realtime) against the rail's circuits; the thread calls it
  // every interval. A NIC's down time counts to the newest sample heard from its host (not past
  // now_ns); a host not heard from is not judged. Returns the failures found now (each slot
  // reported once per circuit set).
  std::vector<PortFailure> judge(const std::vector<ocs::Circuit>& circuits, const std::set<ocs::Port>& masked,
                                 int64_t now_ns, int64_t now_mono_ns);

 private:
  void tick();  // one judgement against the rail's circuits now (the loop's)

  std::shared_ptr<Orchestrator> rail_;
  std::vector<WatchedNic> nics_;
  OnFailure on_failure_;
  NicWatchOptions options_;
  struct Layer {
    bool up = true;
    int64_t down_since_ns = 0;
  };
  struct Track {
    std::map<std::string, Layer> layers;  // by layer name; no entry: no reading yet (not judged)
    std::vector<ocs::Circuit> circuits;   // the slot's circuits when last judged
    int64_t made_ns = 0;                  // when those were first seen
    bool reported = false;
  };
  mutable std::mutex mu_;       // tracks_: readings come from any thread
  std::vector<Track> tracks_;  // one per nics_ entry
  std::map<std::string, int64_t> heard_;  // by host: the newest sample's time
  std::unique_ptr<Periodic> loop_;  // last: stopped before the rest goes
};

}  // namespace ocslab::phase
