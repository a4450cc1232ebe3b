#include "ocslab/analysis/breakdown.h"

#include <fmt/format.h>
#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <ostream>
#include <tuple>

#include "ocslab/common/csv_writer.h"

namespace ocslab::analysis {

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kFailed:
      return "failed";
    case Status::kUnaffected:
      return "unaffected";
    case Status::kIncomplete:
      return "incomplete";
    case Status::kDisconnected:
      return "disconnected";
    case Status::kLost:
      return "lost";
    case Status::kUnseen:
      return "unseen";
  }
  return "?";
}

const char* intent_name(Intent i) {
  switch (i) {
    case Intent::kUnknown:
      return "unknown";
    case Intent::kMove:
      return "move";
    case Intent::kUp:
      return "up";
    case Intent::kDark:
      return "dark";
    case Intent::kStay:
      return "stay";
  }
  return "?";
}

namespace {

// Each endpoint's partner in a mapping (the first link naming it).
std::map<Endpoint, Endpoint> partners(const MappingLinks& m) {
  std::map<Endpoint, Endpoint> p;
  for (const auto& [a, b] : m.links) {
    p.emplace(a, b);
    p.emplace(b, a);
  }
  return p;
}

}  // namespace

std::map<Endpoint, Intent> intents_between(const MappingLinks& before, const MappingLinks& after) {
  auto pb = partners(before), pa = partners(after);
  std::map<Endpoint, Intent> out;
  for (const auto& [e, partner] : pb) {
    auto it = pa.find(e);
    out[e] = it == pa.end() ? Intent::kDark : it->second == partner ? Intent::kStay : Intent::kMove;
  }
  for (const auto& [e, partner] : pa) {
    if (!pb.count(e)) out[e] = Intent::kUp;
  }
  return out;
}

const IterationIntent* Intents::find(const std::string& r, int iteration, const std::string& mapping) const {
  if (!run.empty() && r != run) return nullptr;
  auto it = iterations.find(iteration);
  if (it == iterations.end()) return nullptr;
  if (!mapping.empty() && mapping != it->second.mapping) return nullptr;
  return &it->second;
}

Intent Intents::at(const std::string& r, int iteration, const std::string& mapping, const std::string& host,
                   const std::string& interface) const {
  const IterationIntent* it = find(r, iteration, mapping);
  if (!it) return Intent::kUnknown;
  auto p = it->ports.find(Endpoint{host, interface});
  return p == it->ports.end() ? Intent::kStay : p->second;
}

Intents derive_intents(const std::map<std::string, MappingLinks>& mappings, const std::string& initial,
                       const std::vector<AppliedMapping>& applied, const std::string& run) {
  Intents out;
  out.run = run;
  // The mapping on the switch before the next reconfiguration; null when not known.
  const MappingLinks* current = nullptr;
  if (auto it = mappings.find(initial); it != mappings.end()) current = &it->second;
  for (const auto& a : applied) {
    auto next = mappings.find(a.mapping);
    if (current && next != mappings.end()) {
      IterationIntent& ii = out.iterations[a.iteration];
      ii = {a.mapping, intents_between(*current, next->second), {}, {}};
      for (const auto& [e, p] : partners(*current)) ii.peer_before[e] = p.host;
      for (const auto& [e, p] : partners(next->second)) ii.peer_after[e] = p.host;
    }
    current = a.ok && next != mappings.end() ? &next->second : nullptr;
  }
  return out;
}

const std::array<const char*, kEdgeCount>& edge_columns() {
  static const std::array<const char*, kEdgeCount> c = {
      "issued_ns",        "acked_ns",        "light_lost_ns",       "light_back_ns",
      "firmware_down_ns", "firmware_up_ns",  "carrier_down_ns",     "carrier_up_ns",
      "rdma_stalled_ns",  "rdma_resumed_ns", "carrier_bit_down_ns", "carrier_bit_up_ns"};
  return c;
}

const std::array<const char*, kDurationCount>& duration_columns() {
  static const std::array<const char*, kDurationCount> c = {"control_ms",  "switching_ms", "dark_ms",
                                                            "firmware_ms", "carrier_ms",   "kernel_ms",
                                                            "rdma_ms",     "outage_ms",    "total_ms"};
  return c;
}

std::optional<int64_t> BreakdownRow::duration_ns(Duration d) const {
  auto diff = [&](Edge to, Edge from) -> std::optional<int64_t> {
    int64_t r = 0;
    if (!edges[to] || !edges[from] || __builtin_sub_overflow(*edges[to], *edges[from], &r)) return std::nullopt;
    return r;
  };
  switch (d) {
    case kControl:
      return diff(kAcked, kIssued);
    case kSwitching:
      return diff(kLightBack, kIssued);
    case kDark:
      return diff(kLightBack, kLightLost);
    case kFirmware:
      return diff(kFirmwareUp, kLightBack);
    case kCarrier:
      return diff(kCarrierUp, kLightBack);
    case kKernel:
      return diff(kCarrierUp, kFirmwareUp);
    case kRdma:
      return diff(kRdmaResumed, kCarrierUp);
    case kOutage:
      return diff(kRdmaResumed, kRdmaStalled);
    case kTotal:
      return edges[kRdmaResumed] ? diff(kRdmaResumed, kIssued) : diff(kCarrierUp, kIssued);
    case kDurationCount:
      break;
  }
  return std::nullopt;
}

namespace {

constexpr int64_t kWindowBeforeCommandNs = 200'000'000;  // an iteration starts 200 ms before its command
constexpr int64_t kMinGapNs = 1'000'000'000;             // edge-cut iterations: > 1 s apart

enum Layer { kLight, kFirmwareLayer, kCarrierLayer, kLayerCount };
static_assert((1u << kLight) == kAwaitedLight && (1u << kFirmwareLayer) == kAwaitedFirmware &&
              (1u << kCarrierLayer) == kAwaitedCarrier);

struct PairState {
  std::array<std::optional<int64_t>, kLayerCount> down, up;
  std::optional<int64_t> stalled, resumed;
  std::optional<int64_t> bit_down, bit_up;  // the polled live carrier bit (no layer of its own)
};

// The gid probe's rows of one pair in one iteration.
struct GidState {
  int gid_changes = 0, neigh_changes = 0;
  std::vector<GidLoss> lost;
};

// A GID table as its rows left it: (table, index) -> the unit ("roce_v2 ::ffff:10.10.0.1"),
// string ids.
using GidTable = std::map<std::pair<uint32_t, int>, uint32_t>;

// An address a queue pair may have been created with: RoCE v2, not the link-local default.
bool address_gid(std::string_view detail) {
  constexpr std::string_view kV2 = "roce_v2 ";
  if (detail.substr(0, kV2.size()) != kV2) return false;
  std::string_view a = detail.substr(kV2.size());
  const bool link_local = a.size() >= 4 && (a[0] == 'f' || a[0] == 'F') && (a[1] == 'e' || a[1] == 'E') &&
                          std::string_view("89abAB").find(a[2]) != std::string_view::npos;
  return !a.empty() && !link_local;
}

struct Iteration {
  uint32_t run = 0;
  int number = 0;
  std::optional<int64_t> issued;
  uint32_t mapping = 0;
  std::optional<std::pair<int64_t, bool>> ack;  // first ack: time, success
  std::vector<PairState> pairs;
};

struct Pair {
  uint32_t host, iface;
  Kind light = Kind::kRxPower;  // the preferred light source present for this pair
  Kind firmware = Kind::kLinkFirmware;
  bool has_light = false, has_firmware = false;
  bool has_carrier = false, has_rdma = false;  // carrier rows; rdma stalled/resumed rows
};

// A row's partner hosts before and after its reconfiguration ("" for none), when known.
struct RdmaPeers {
  bool known = false;
  std::string before, after;
};

bool is_layer(Kind k) { return k != Kind::kCommand && k != Kind::kAck; }

// Preference among sources of the same layer: ground truth first.
int light_rank(Kind k) { return k == Kind::kLightEmulator ? 0 : k == Kind::kLightOcsPower ? 1 : 2; }

// One computation of a breakdown. Each step reads the timeline's events (in time order) and
// leaves what it learnt in the fields the later steps read; run() names the steps in order.
class BreakdownPass {
 public:
  BreakdownPass(const Timeline& tl, const BreakdownOptions& options, const Intents* intents)
      : tl_(tl), strs_(tl.strings), options_(options), intents_(intents), ev_(tl.events) {
    std::stable_sort(ev_.begin(), ev_.end(), [](const Event& a, const Event& b) { return a.t_ns < b.t_ns; });
  }

  Breakdown run() {
    find_pairs();
    cut_iterations();
    read_commands();
    read_intents();
    read_peers();
    read_history();
    read_edges();
    read_gid_tables();
    write_rows();
    return std::move(out_);
  }

 private:
  // Host/interface pairs and their preferred light and firmware sources.
  void find_pairs() {
    std::map<std::pair<uint32_t, uint32_t>, size_t> pair_index;
    pair_of_.assign(ev_.size(), -1);
    for (size_t i = 0; i < ev_.size(); ++i) {
      const Event& e = ev_[i];
      if (e.kind == Kind::kCommand) any_command_ = true;
      if (!is_layer(e.kind) || strs_.str(e.host) == "switch") continue;
      auto [it, added] = pair_index.emplace(std::make_pair(e.host, e.subject), pairs_.size());
      if (added) pairs_.push_back({e.host, e.subject});
      Pair& p = pairs_[it->second];
      pair_of_[i] = static_cast<int>(it->second);
      if (e.kind == Kind::kLightEmulator || e.kind == Kind::kLightOcsPower || e.kind == Kind::kRxPower) {
        if (!p.has_light || light_rank(e.kind) < light_rank(p.light)) p.light = e.kind;
        p.has_light = true;
      }
      if (e.kind == Kind::kLinkEmulator || e.kind == Kind::kLinkFirmware) {
        if (!p.has_firmware || e.kind == Kind::kLinkEmulator) p.firmware = e.kind;
        p.has_firmware = true;
      }
      if (e.kind == Kind::kCarrier) p.has_carrier = true;
      if (e.kind == Kind::kStalled || e.kind == Kind::kResumed) p.has_rdma = true;
    }
  }

  // The layer and 0/1 state of an event from a pair's selected sources; -1 when it is not one.
  int layer_state(size_t i, int& layer) const {
    const Event& e = ev_[i];
    if (pair_of_[i] < 0) return -1;
    const Pair& p = pairs_[static_cast<size_t>(pair_of_[i])];
    switch (e.kind) {
      case Kind::kLightEmulator:
      case Kind::kLightOcsPower:
        if (e.kind != p.light) return -1;
        layer = kLight;
        return e.value != 0;
      case Kind::kRxPower:
        if (e.kind != p.light) return -1;
        layer = kLight;
        return e.value >= options_.dark_dbm;
      case Kind::kLinkEmulator:
      case Kind::kLinkFirmware:
        if (e.kind != p.firmware) return -1;
        layer = kFirmwareLayer;
        return e.value != 0;
      case Kind::kCarrier:
        layer = kCarrierLayer;
        return e.value != 0;
      default:
        return -1;
    }
  }

  // Which iteration each event belongs to (index into iters_; iteration 0 and earlier rows
  // included, dropped when the rows are written).
  void cut_iterations() {
    iter_of_.resize(ev_.size());
    if (tl_.has_iteration) {
      out_.iterations_from = "iteration column";
      std::map<std::pair<std::string_view, int>, size_t> index;
      for (size_t i = 0; i < ev_.size(); ++i) {
        auto [it, added] =
            index.emplace(std::make_pair(std::string_view(strs_.str(ev_[i].run)), ev_[i].iteration), iters_.size());
        if (added) iters_.push_back({ev_[i].run, ev_[i].iteration, {}, 0, {}, {}});
        iter_of_[i] = it->second;
      }
    } else {
      out_.iterations_from = any_command_ ? "ocs commands" : "layer edges";
      std::vector<int64_t> starts = any_command_ ? command_starts() : edge_starts();
      for (size_t n = 0; n <= starts.size(); ++n) iters_.push_back({0, static_cast<int>(n), {}, 0, {}, {}});
      for (size_t i = 0; i < ev_.size(); ++i)
        iter_of_[i] = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), ev_[i].t_ns) - starts.begin());
    }
    for (auto& it : iters_) it.pairs.resize(pairs_.size());
  }

  // Iterations cut at the OCS commands: each starts kWindowBeforeCommandNs before its command.
  std::vector<int64_t> command_starts() const {
    std::vector<int64_t> starts;
    for (const Event& e : ev_) {
      // Saturating: a nonsensical t_ns must not overflow.
      int64_t start = 0;
      if (__builtin_sub_overflow(e.t_ns, kWindowBeforeCommandNs, &start)) start = std::numeric_limits<int64_t>::min();
      if (e.kind == Kind::kCommand) starts.push_back(start);
    }
    return starts;
  }

  // Iterations cut where a layer goes down, more than kMinGapNs after the previous cut. The
  // live carrier bit cuts too (as a layer of its own): it usually goes down before the
  // announcement, and a cut at the announcement would leave the bit's down in the iteration
  // before.
  std::vector<int64_t> edge_starts() const {
    std::vector<int64_t> starts;
    std::map<std::pair<size_t, int>, int> last;  // (pair, layer) -> previous state
    for (size_t i = 0; i < ev_.size(); ++i) {
      int layer = 0;
      int state = layer_state(i, layer);
      if (state < 0 && ev_[i].kind == Kind::kCarrierBit && pair_of_[i] >= 0) {
        layer = kLayerCount;
        state = ev_[i].value != 0;
      }
      if (state < 0) continue;
      auto key = std::make_pair(static_cast<size_t>(pair_of_[i]), layer);
      auto it = last.find(key);
      bool falling = it != last.end() && it->second == 1 && state == 0;
      last[key] = state;
      // Unsigned: events are sorted, so the difference is >= 0 and fits even for extreme stamps.
      if (falling && (starts.empty() || static_cast<uint64_t>(ev_[i].t_ns) - static_cast<uint64_t>(starts.back()) >
                                            static_cast<uint64_t>(kMinGapNs)))
        starts.push_back(ev_[i].t_ns);
    }
    return starts;
  }

  // Commands first: an iteration's run and mapping decide its intents before its layer rows
  // are read.
  void read_commands() {
    for (size_t i = 0; i < ev_.size(); ++i) {
      const Event& e = ev_[i];
      Iteration& it = iters_[iter_of_[i]];
      if (e.kind == Kind::kCommand && !it.issued) {
        it.issued = e.t_ns;
        it.mapping = e.subject;
        if (!tl_.has_iteration) it.run = e.run;
      }
    }
  }

  // What each iteration meant to do to each pair (kUnknown without intents).
  void read_intents() {
    out_.has_intents = intents_ != nullptr;
    if (intents_) out_.intents_from = intents_->from;
    intent_.assign(iters_.size(), std::vector<Intent>(pairs_.size(), Intent::kUnknown));
    if (!intents_) return;
    for (size_t ii = 0; ii < iters_.size(); ++ii) {
      if (iters_[ii].number < 1) continue;
      for (size_t pi = 0; pi < pairs_.size(); ++pi)
        intent_[ii][pi] = intents_->at(strs_.str(iters_[ii].run), iters_[ii].number, strs_.str(iters_[ii].mapping),
                                       strs_.str(pairs_[pi].host), strs_.str(pairs_[pi].iface));
    }
  }

  // With intents, each row's partner before and after (RdmaPeers): which of the host's
  // peer-labelled RDMA queue pairs its stall and resume come from.
  void read_peers() {
    peers_.assign(iters_.size(), std::vector<RdmaPeers>(pairs_.size()));
    if (!intents_) return;
    for (size_t ii = 0; ii < iters_.size(); ++ii) {
      const IterationIntent* known =
          iters_[ii].number < 1
              ? nullptr
              : intents_->find(strs_.str(iters_[ii].run), iters_[ii].number, strs_.str(iters_[ii].mapping));
      if (!known) continue;
      for (size_t pi = 0; pi < pairs_.size(); ++pi) {
        Endpoint ep{std::string(strs_.str(pairs_[pi].host)), std::string(strs_.str(pairs_[pi].iface))};
        RdmaPeers& rp = peers_[ii][pi];
        // Known when the mappings give the port a partner before or after the command; a port
        // they name in neither (a NIC the mappings leave out) keeps the first stall and resume of
        // any of its queue pairs, as without intents.
        auto b = known->peer_before.find(ep);
        auto a = known->peer_after.find(ep);
        if (b != known->peer_before.end()) rp.before = b->second;
        if (a != known->peer_after.end()) rp.after = a->second;
        rp.known = b != known->peer_before.end() || a != known->peer_after.end();
      }
    }
  }

  // With intents, each pair's layer readings in time order: a port coming up must bring up the
  // layers that were not up at the command (a loopback's carrier is never down).
  void read_history() {
    history_.resize(intents_ ? pairs_.size() : 0);
    if (!intents_) return;
    for (size_t i = 0; i < ev_.size(); ++i) {
      int layer = 0;
      int state = layer_state(i, layer);
      if (state >= 0) history_[static_cast<size_t>(pair_of_[i])][layer].emplace_back(ev_[i].t_ns, state);
    }
  }

  // The state of a pair's layer just before t (-1: no reading yet).
  int state_before(size_t pi, int layer, int64_t t) const {
    const auto& h = history_[pi][layer];
    auto it = std::lower_bound(h.begin(), h.end(), t, [](const auto& x, int64_t v) { return x.first < v; });
    return it == h.begin() ? -1 : std::prev(it)->second;
  }

  // Each pair's first edges per layer and of RDMA in each iteration.
  void read_edges() {
    // Each pair's last state per layer over the whole timeline (-1: none yet): a port coming up
    // from dark has no down edge in its iteration, so its up edge is a 0->1 change (or a first
    // reading of 1) at or after the command.
    std::vector<std::array<int, kLayerCount>> last_state(pairs_.size(), {-1, -1, -1});
    std::vector<int> last_bit(pairs_.size(), -1);  // the same for the live carrier bit
    for (size_t i = 0; i < ev_.size(); ++i) {
      const Event& e = ev_[i];
      Iteration& it = iters_[iter_of_[i]];
      if (e.kind == Kind::kCommand) continue;
      if (e.kind == Kind::kAck) {
        if (!it.ack) it.ack = std::make_pair(e.t_ns, e.value != 0);
        continue;
      }
      if (pair_of_[i] < 0) continue;
      const auto pi = static_cast<size_t>(pair_of_[i]);
      if (e.kind == Kind::kStalled || e.kind == Kind::kResumed) {
        read_rdma_edge(i, pi);
        continue;
      }
      if (e.kind == Kind::kCarrierBit) {
        read_bit_edge(i, pi, last_bit[pi]);
        continue;
      }
      int layer = 0;
      int state = layer_state(i, layer);
      if (state < 0) continue;
      int before = last_state[pi][layer];
      last_state[pi][layer] = state;
      PairState& ps = it.pairs[pi];
      if (intent_[iter_of_[i]][pi] == Intent::kUp) {
        // A port coming up: only up edges at or after the command count; it has no down edges.
        if (state == 1 && before != 1 && after_command(e, it) && !ps.up[layer]) ps.up[layer] = e.t_ns;
        continue;
      }
      if (state == 0 && !ps.down[layer]) ps.down[layer] = e.t_ns;
      if (state == 1 && ps.down[layer] && !ps.up[layer]) ps.up[layer] = e.t_ns;
    }
  }

  // The gid probe's rows: per pair and iteration the changes counted, and each index that held an
  // address before the iteration's first GID change and does not hold it after its last.
  void read_gid_tables() {
    gid_.assign(iters_.size(), std::vector<GidState>(pairs_.size()));
    std::vector<GidTable> now(pairs_.size()), before(pairs_.size());
    std::vector<size_t> open(pairs_.size(), iters_.size());  // the iteration whose changes are read
    for (size_t i = 0; i < ev_.size(); ++i) {
      const Event& e = ev_[i];
      if (!is_gid_kind(e.kind) && e.kind != Kind::kNeighChange) continue;
      out_.has_gid = true;
      if (pair_of_[i] < 0) continue;
      const auto pi = static_cast<size_t>(pair_of_[i]);
      GidState& g = gid_[iter_of_[i]][pi];
      if (e.kind == Kind::kNeighChange) {
        ++g.neigh_changes;
        continue;
      }
      if (open[pi] != iter_of_[i]) {
        close_gid_window(pi, open[pi], before[pi], now[pi]);
        open[pi] = iter_of_[i];
        before[pi] = now[pi];
      }
      const std::pair<uint32_t, int> key{e.table, static_cast<int>(e.value)};
      if (e.kind == Kind::kGidRemoved) {
        now[pi].erase(key);
      } else {
        now[pi][key] = e.detail;
      }
      if (e.kind != Kind::kGidInitial) ++g.gid_changes;
    }
    for (size_t pi = 0; pi < pairs_.size(); ++pi) close_gid_window(pi, open[pi], before[pi], now[pi]);
  }

  // The losses of pair pi in iteration ii: the address entries of `before` that `after` does not
  // hold at the same index.
  void close_gid_window(size_t pi, size_t ii, const GidTable& before, const GidTable& after) {
    if (ii >= iters_.size()) return;
    for (const auto& [key, held] : before) {
      if (!address_gid(strs_.str(held))) continue;
      auto at = after.find(key);
      if (at != after.end() && at->second == held) continue;
      GidLoss l{strs_.str(key.first), key.second, strs_.str(held), at == after.end() ? "" : strs_.str(at->second), {}};
      for (const auto& [k2, d2] : after)
        if (k2.first == key.first && d2 == held) l.moved_to = k2.second;
      gid_[ii][pi].lost.push_back(std::move(l));
    }
  }

  static bool after_command(const Event& e, const Iteration& it) { return !it.issued || e.t_ns >= *it.issued; }

  // A live carrier bit reading of pair pi, `last` its previous one: the row's first down and the
  // first up after it, or for a port coming up its first up at or after the command, as for a
  // layer.
  void read_bit_edge(size_t i, size_t pi, int& last) {
    const Event& e = ev_[i];
    const Iteration& it = iters_[iter_of_[i]];
    PairState& ps = iters_[iter_of_[i]].pairs[pi];
    const int state = e.value != 0;
    const int before = last;
    last = state;
    if (intent_[iter_of_[i]][pi] == Intent::kUp) {
      if (state == 1 && before != 1 && after_command(e, it) && !ps.bit_up) ps.bit_up = e.t_ns;
      return;
    }
    if (state == 0 && !ps.bit_down) ps.bit_down = e.t_ns;
    if (state == 1 && ps.bit_down && !ps.bit_up) ps.bit_up = e.t_ns;
  }

  // A stalled or resumed event of pair pi: its first stall, and its first resume after it.
  void read_rdma_edge(size_t i, size_t pi) {
    const Event& e = ev_[i];
    const Iteration& it = iters_[iter_of_[i]];
    PairState& ps = iters_[iter_of_[i]].pairs[pi];
    // A port coming up: only up edges at or after the command count; it has no down edges.
    const bool up = intent_[iter_of_[i]][pi] == Intent::kUp;
    const bool after = after_command(e, it);
    const RdmaPeers& rp = peers_[iter_of_[i]][pi];
    if (!strs_.str(e.peer).empty() && rp.known) {
      // A peer-labelled queue pair with the mapping's partners known: the stall is the old
      // partner's pair's last one before the resume, the resume the new partner's first after the
      // command (its circuit was dark before it; for a port that keeps its partner, after a stall).
      std::string_view peer = strs_.str(e.peer);
      if (e.kind == Kind::kStalled && !up && peer == rp.before && !ps.resumed) ps.stalled = e.t_ns;
      if (e.kind == Kind::kResumed && peer == rp.after && after && !ps.resumed &&
          (up || ps.stalled || rp.before != rp.after))
        ps.resumed = e.t_ns;
      return;
    }
    if (e.kind == Kind::kStalled) {
      if (!up && !ps.stalled) ps.stalled = e.t_ns;
      return;
    }
    if (up ? after && !ps.resumed : ps.stalled && !ps.resumed) ps.resumed = e.t_ns;
  }

  // One row per iteration (1 and later) and pair, by run, iteration, host and interface.
  void write_rows() {
    std::vector<size_t> iter_order;
    for (size_t i = 0; i < iters_.size(); ++i)
      if (iters_[i].number >= 1) iter_order.push_back(i);
    std::sort(iter_order.begin(), iter_order.end(), [&](size_t a, size_t b) {
      return std::make_tuple(std::string_view(strs_.str(iters_[a].run)), iters_[a].number) <
             std::make_tuple(std::string_view(strs_.str(iters_[b].run)), iters_[b].number);
    });
    std::vector<size_t> pair_order(pairs_.size());
    for (size_t i = 0; i < pairs_.size(); ++i) pair_order[i] = i;
    std::sort(pair_order.begin(), pair_order.end(), [&](size_t a, size_t b) {
      return std::make_tuple(std::string_view(strs_.str(pairs_[a].host)),
                             std::string_view(strs_.str(pairs_[a].iface))) <
             std::make_tuple(std::string_view(strs_.str(pairs_[b].host)), std::string_view(strs_.str(pairs_[b].iface)));
    });
    out_.iterations = iter_order.size();
    for (size_t ii : iter_order)
      for (size_t pi : pair_order) out_.rows.push_back(make_row(ii, pi));
  }

  BreakdownRow make_row(size_t ii, size_t pi) const {
    const Iteration& it = iters_[ii];
    const PairState& ps = it.pairs[pi];
    BreakdownRow r;
    r.run = strs_.str(it.run);
    r.iteration = it.number;
    r.mapping = strs_.str(it.mapping);
    r.host = strs_.str(pairs_[pi].host);
    r.interface = strs_.str(pairs_[pi].iface);
    r.edges[kIssued] = it.issued;
    if (it.ack && it.ack->second) r.edges[kAcked] = it.ack->first;
    r.edges[kLightLost] = ps.down[kLight];
    r.edges[kLightBack] = ps.up[kLight];
    r.edges[kFirmwareDown] = ps.down[kFirmwareLayer];
    r.edges[kFirmwareUp] = ps.up[kFirmwareLayer];
    r.edges[kCarrierDown] = ps.down[kCarrierLayer];
    r.edges[kCarrierUp] = ps.up[kCarrierLayer];
    r.edges[kRdmaStalled] = ps.stalled;
    r.edges[kRdmaResumed] = ps.resumed;
    r.edges[kCarrierBitDown] = ps.bit_down;
    r.edges[kCarrierBitUp] = ps.bit_up;
    r.intent = intent_[ii][pi];
    r.gid_changes = gid_[ii][pi].gid_changes;
    r.neigh_changes = gid_[ii][pi].neigh_changes;
    r.gid_lost = gid_[ii][pi].lost;
    RowFacts f = row_facts(ii, pi, r);
    std::optional<int64_t> capture_end = it.issued ? tl_.capture_lost_at(r.run, r.host) : std::nullopt;
    f.capture_lost = capture_end && *capture_end < *it.issued;
    r.status = classify_row(f);
    if (r.status == Status::kLost) r.capture_end_ns = capture_end;
    return r;
  }

  // The facts classify_row decides the status from; sets r.awaited for a port coming up.
  RowFacts row_facts(size_t ii, size_t pi, BreakdownRow& r) const {
    const Iteration& it = iters_[ii];
    const PairState& ps = it.pairs[pi];
    const Pair& p = pairs_[pi];
    RowFacts f;
    f.command_failed = any_command_ && !(it.ack && it.ack->second);
    f.intent = r.intent;
    // Coming up: every layer the pair is probed on that was not up at the command must have
    // come up (RDMA always: its first traffic).
    f.came_up = true;
    f.up_expected = p.has_rdma;
    f.any_up = ps.resumed.has_value();
    if (r.intent == Intent::kUp) {
      const std::array<bool, kLayerCount> probed = {p.has_light, p.has_firmware, p.has_carrier};
      for (int l = 0; l < kLayerCount; ++l) {
        f.any_up = f.any_up || ps.up[l].has_value();
        if (!probed[l] || (it.issued && state_before(pi, l, *it.issued) == 1)) continue;
        f.up_expected = true;
        f.came_up = f.came_up && ps.up[l].has_value();
        r.awaited |= static_cast<uint8_t>(1u << l);  // kLight, kFirmwareLayer, kCarrierLayer: bits 1, 2, 4
      }
      f.came_up = f.came_up && (!p.has_rdma || ps.resumed);
      if (p.has_rdma) r.awaited |= kAwaitedRdma;
    }
    f.went_down = ps.stalled.has_value();
    f.stayed_down = ps.stalled && !ps.resumed;
    // The row's dark duration; none with both light edges means a span past int64 (nonsense t_ns): long.
    const auto dark_ns = r.duration_ns(kDark);
    // The NIC's link went down and came back (firmware probe, or the emulator's delivery to the
    // guest): an outage the kernel was told of, however short.
    const bool link_bounced = r.edges[kFirmwareDown] && r.edges[kFirmwareUp];
    const bool long_dark = r.edges[kLightLost] && r.edges[kLightBack] && (!dark_ns || *dark_ns >= options_.unseen_min_ns);
    f.carrier_unseen = p.has_carrier && (long_dark || link_bounced) && !r.edges[kCarrierDown] &&
                       !r.edges[kCarrierUp] && !r.edges[kCarrierBitDown] && !r.edges[kCarrierBitUp];
    for (int l = 0; l < kLayerCount; ++l) {
      f.went_down = f.went_down || ps.down[l].has_value();
      f.stayed_down = f.stayed_down || (ps.down[l] && !ps.up[l]);
    }
    return f;
  }

  const Timeline& tl_;
  const StringTable& strs_;
  const BreakdownOptions& options_;
  const Intents* intents_;
  std::vector<Event> ev_;  // the timeline's events in time order
  std::vector<Pair> pairs_;
  std::vector<int> pair_of_;  // each event's pair (index into pairs_), -1 for none
  bool any_command_ = false;
  std::vector<Iteration> iters_;
  std::vector<size_t> iter_of_;                // each event's iteration (index into iters_)
  std::vector<std::vector<Intent>> intent_;    // [iteration][pair]
  std::vector<std::vector<RdmaPeers>> peers_;  // [iteration][pair]
  std::vector<std::array<std::vector<std::pair<int64_t, int>>, kLayerCount>> history_;  // [pair][layer]
  std::vector<std::vector<GidState>> gid_;                                              // [iteration][pair]
  Breakdown out_;
};

}  // namespace

Status classify_row(const RowFacts& f) {
  // A failed command stays failed even where the host's capture was lost: that is the switch's.
  if (f.command_failed) return Status::kFailed;
  if (f.capture_lost) return Status::kLost;
  switch (f.intent) {
    case Intent::kUp:
      // Nothing to bring up and nothing came up: unaffected.
      if (!f.up_expected && !f.any_up) return Status::kUnaffected;
      return f.came_up ? Status::kOk : Status::kIncomplete;
    case Intent::kDark:
      return Status::kDisconnected;
    default:
      if (!f.went_down) return Status::kUnaffected;
      if (f.stayed_down) return Status::kIncomplete;
      return f.carrier_unseen ? Status::kUnseen : Status::kOk;
  }
}

Breakdown compute_breakdown(const Timeline& tl, const BreakdownOptions& options, const Intents* intents) {
  return BreakdownPass(tl, options, intents).run();
}

std::vector<std::string> breakdown_columns() {
  std::vector<std::string> c = {"run", "iteration", "mapping", "host", "interface", "status"};
  for (const char* e : edge_columns()) c.emplace_back(e);
  for (const char* d : duration_columns()) c.emplace_back(d);
  return c;
}

std::string format_ms(int64_t ns) {
  uint64_t a = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:06}", ns < 0 ? "-" : "", a / 1'000'000, a % 1'000'000);
}

void write_breakdown_csv(const Breakdown& b, std::ostream& out) {
  CsvWriter csv(out);
  auto columns = breakdown_columns();
  if (b.has_intents) columns.emplace_back("intent");
  if (b.has_gid) {
    columns.emplace_back("gid_changes");
    columns.emplace_back("neigh_changes");
  }
  csv.header(columns);
  for (const auto& r : b.rows) {
    std::vector<std::string> f = {r.run,       std::to_string(r.iteration), r.mapping, r.host,
                                  r.interface, status_name(r.status)};
    for (const auto& e : r.edges) f.push_back(e ? std::to_string(*e) : "");
    for (int d = 0; d < kDurationCount; ++d) {
      auto v = r.duration_ns(static_cast<Duration>(d));
      f.push_back(v ? format_ms(*v) : "");
    }
    if (b.has_intents) f.emplace_back(intent_name(r.intent));
    if (b.has_gid) {
      f.push_back(std::to_string(r.gid_changes));
      f.push_back(std::to_string(r.neigh_changes));
    }
    csv.row(f);
  }
  csv.flush();
}

}  // namespace ocslab::analysis
