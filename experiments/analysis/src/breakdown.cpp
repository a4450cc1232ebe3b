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
      "issued_ns",      "acked_ns",        "light_lost_ns", "light_back_ns",   "firmware_down_ns",
      "firmware_up_ns", "carrier_down_ns", "carrier_up_ns", "rdma_stalled_ns", "rdma_resumed_ns"};
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
};

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

}  // namespace

Breakdown compute_breakdown(const Timeline& tl, const BreakdownOptions& options, const Intents* intents) {
  const StringTable& strs = tl.strings;
  std::vector<Event> ev = tl.events;
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.t_ns < b.t_ns; });

  // Host/interface pairs and their preferred light and firmware sources.
  std::map<std::pair<uint32_t, uint32_t>, size_t> pair_index;
  std::vector<Pair> pairs;
  std::vector<int> pair_of(ev.size(), -1);
  bool any_command = false;
  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    if (e.kind == Kind::kCommand) any_command = true;
    if (!is_layer(e.kind) || strs.str(e.host) == "switch") continue;
    auto [it, added] = pair_index.emplace(std::make_pair(e.host, e.subject), pairs.size());
    if (added) pairs.push_back({e.host, e.subject});
    Pair& p = pairs[it->second];
    pair_of[i] = static_cast<int>(it->second);
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

  // The layer and 0/1 state of an event from a pair's selected sources; -1 when it is not one.
  auto layer_state = [&](size_t i, int& layer) -> int {
    const Event& e = ev[i];
    if (pair_of[i] < 0) return -1;
    const Pair& p = pairs[static_cast<size_t>(pair_of[i])];
    switch (e.kind) {
      case Kind::kLightEmulator:
      case Kind::kLightOcsPower:
        if (e.kind != p.light) return -1;
        layer = kLight;
        return e.value != 0;
      case Kind::kRxPower:
        if (e.kind != p.light) return -1;
        layer = kLight;
        return e.value >= options.dark_dbm;
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
  };

  // Which iteration each event belongs to (index into iters; iteration 0 and earlier rows
  // included, dropped when the rows are written).
  Breakdown out;
  std::vector<Iteration> iters;
  std::vector<size_t> iter_of(ev.size());
  if (tl.has_iteration) {
    out.iterations_from = "iteration column";
    std::map<std::pair<std::string_view, int>, size_t> index;
    for (size_t i = 0; i < ev.size(); ++i) {
      auto [it, added] =
          index.emplace(std::make_pair(std::string_view(strs.str(ev[i].run)), ev[i].iteration), iters.size());
      if (added) iters.push_back({ev[i].run, ev[i].iteration, {}, 0, {}, {}});
      iter_of[i] = it->second;
    }
  } else {
    std::vector<int64_t> starts;
    if (any_command) {
      out.iterations_from = "ocs commands";
      for (const Event& e : ev) {
        // Saturating: a nonsensical t_ns must not overflow.
        int64_t start = 0;
        if (__builtin_sub_overflow(e.t_ns, kWindowBeforeCommandNs, &start)) start = std::numeric_limits<int64_t>::min();
        if (e.kind == Kind::kCommand) starts.push_back(start);
      }
    } else {
      out.iterations_from = "layer edges";
      std::map<std::pair<size_t, int>, int> last;  // (pair, layer) -> previous state
      for (size_t i = 0; i < ev.size(); ++i) {
        int layer = 0;
        int state = layer_state(i, layer);
        if (state < 0) continue;
        auto key = std::make_pair(static_cast<size_t>(pair_of[i]), layer);
        auto it = last.find(key);
        bool falling = it != last.end() && it->second == 1 && state == 0;
        last[key] = state;
        // Unsigned: events are sorted, so the difference is >= 0 and fits even for extreme stamps.
        if (falling && (starts.empty() || static_cast<uint64_t>(ev[i].t_ns) - static_cast<uint64_t>(starts.back()) >
                                              static_cast<uint64_t>(kMinGapNs)))
          starts.push_back(ev[i].t_ns);
      }
    }
    for (size_t n = 0; n <= starts.size(); ++n) iters.push_back({0, static_cast<int>(n), {}, 0, {}, {}});
    for (size_t i = 0; i < ev.size(); ++i)
      iter_of[i] = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), ev[i].t_ns) - starts.begin());
  }
  for (auto& it : iters) it.pairs.resize(pairs.size());

  // Commands first: an iteration's run and mapping decide its intents before its layer rows
  // are read.
  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    Iteration& it = iters[iter_of[i]];
    if (e.kind == Kind::kCommand && !it.issued) {
      it.issued = e.t_ns;
      it.mapping = e.subject;
      if (!tl.has_iteration) it.run = e.run;
    }
  }

  // What each iteration meant to do to each pair (kUnknown without intents).
  out.has_intents = intents != nullptr;
  if (intents) out.intents_from = intents->from;
  std::vector<std::vector<Intent>> intent(iters.size(), std::vector<Intent>(pairs.size(), Intent::kUnknown));
  if (intents) {
    for (size_t ii = 0; ii < iters.size(); ++ii) {
      if (iters[ii].number < 1) continue;
      for (size_t pi = 0; pi < pairs.size(); ++pi)
        intent[ii][pi] = intents->at(strs.str(iters[ii].run), iters[ii].number, strs.str(iters[ii].mapping),
                                             strs.str(pairs[pi].host), strs.str(pairs[pi].iface));
    }
  }

  // With intents, each row's partner before and after (RdmaPeers): which of the host's
  // peer-labelled RDMA queue pairs its stall and resume come from.
  std::vector<std::vector<RdmaPeers>> peers(iters.size(), std::vector<RdmaPeers>(pairs.size()));
  if (intents) {
    for (size_t ii = 0; ii < iters.size(); ++ii) {
      const IterationIntent* known =
          iters[ii].number < 1 ? nullptr
                               : intents->find(strs.str(iters[ii].run), iters[ii].number, strs.str(iters[ii].mapping));
      if (!known) continue;
      for (size_t pi = 0; pi < pairs.size(); ++pi) {
        Endpoint ep{std::string(strs.str(pairs[pi].host)), std::string(strs.str(pairs[pi].iface))};
        RdmaPeers& rp = peers[ii][pi];
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

  // Each pair's last state per layer over the whole timeline (-1: none yet): a port coming up
  // from dark has no down edge in its iteration, so its up edge is a 0->1 change (or a first
  // reading of 1) at or after the command.
  std::vector<std::array<int, kLayerCount>> last_state(pairs.size(), {-1, -1, -1});
  // With intents, each pair's layer readings in time order: a port coming up must bring up the
  // layers that were not up at the command (a loopback's carrier is never down).
  std::vector<std::array<std::vector<std::pair<int64_t, int>>, kLayerCount>> history(intents ? pairs.size() : 0);
  if (intents) {
    for (size_t i = 0; i < ev.size(); ++i) {
      int layer = 0;
      int state = layer_state(i, layer);
      if (state >= 0) history[static_cast<size_t>(pair_of[i])][layer].emplace_back(ev[i].t_ns, state);
    }
  }
  // The state of a pair's layer just before t (-1: no reading yet).
  auto state_before = [&](size_t pi, int layer, int64_t t) {
    const auto& h = history[pi][layer];
    auto it = std::lower_bound(h.begin(), h.end(), t, [](const auto& x, int64_t v) { return x.first < v; });
    return it == h.begin() ? -1 : std::prev(it)->second;
  };

  for (size_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    Iteration& it = iters[iter_of[i]];
    if (e.kind == Kind::kCommand) continue;
    if (e.kind == Kind::kAck) {
      if (!it.ack) it.ack = std::make_pair(e.t_ns, e.value != 0);
      continue;
    }
    if (pair_of[i] < 0) continue;
    const auto pi = static_cast<size_t>(pair_of[i]);
    PairState& ps = it.pairs[pi];
    // A port coming up: only up edges at or after the command count; it has no down edges.
    const bool up = intent[iter_of[i]][pi] == Intent::kUp;
    const bool after_command = !it.issued || e.t_ns >= *it.issued;
    if ((e.kind == Kind::kStalled || e.kind == Kind::kResumed) && !strs.str(e.peer).empty() &&
        peers[iter_of[i]][pi].known) {
      // A peer-labelled queue pair with the mapping's partners known: the stall is the old
      // partner's pair's last one before the resume, the resume the new partner's first after the
      // command (its circuit was dark before it; for a port that keeps its partner, after a stall).
      const RdmaPeers& rp = peers[iter_of[i]][pi];
      std::string_view peer = strs.str(e.peer);
      if (e.kind == Kind::kStalled && !up && peer == rp.before && !ps.resumed) ps.stalled = e.t_ns;
      if (e.kind == Kind::kResumed && peer == rp.after && after_command && !ps.resumed &&
          (up || ps.stalled || rp.before != rp.after))
        ps.resumed = e.t_ns;
      continue;
    }
    if (e.kind == Kind::kStalled) {
      if (!up && !ps.stalled) ps.stalled = e.t_ns;
      continue;
    }
    if (e.kind == Kind::kResumed) {
      if (up ? after_command && !ps.resumed : ps.stalled && !ps.resumed) ps.resumed = e.t_ns;
      continue;
    }
    int layer = 0;
    int state = layer_state(i, layer);
    if (state < 0) continue;
    int before = last_state[pi][layer];
    last_state[pi][layer] = state;
    if (up) {
      if (state == 1 && before != 1 && after_command && !ps.up[layer]) ps.up[layer] = e.t_ns;
      continue;
    }
    if (state == 0 && !ps.down[layer]) ps.down[layer] = e.t_ns;
    if (state == 1 && ps.down[layer] && !ps.up[layer]) ps.up[layer] = e.t_ns;
  }

  std::vector<size_t> iter_order;
  for (size_t i = 0; i < iters.size(); ++i)
    if (iters[i].number >= 1) iter_order.push_back(i);
  std::sort(iter_order.begin(), iter_order.end(), [&](size_t a, size_t b) {
    return std::make_tuple(std::string_view(strs.str(iters[a].run)), iters[a].number) <
           std::make_tuple(std::string_view(strs.str(iters[b].run)), iters[b].number);
  });
  std::vector<size_t> pair_order(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) pair_order[i] = i;
  std::sort(pair_order.begin(), pair_order.end(), [&](size_t a, size_t b) {
    return std::make_tuple(std::string_view(strs.str(pairs[a].host)), std::string_view(strs.str(pairs[a].iface))) <
           std::make_tuple(std::string_view(strs.str(pairs[b].host)), std::string_view(strs.str(pairs[b].iface)));
  });

  out.iterations = iter_order.size();
  for (size_t ii : iter_order) {
    const Iteration& it = iters[ii];
    for (size_t pi : pair_order) {
      const PairState& ps = it.pairs[pi];
      BreakdownRow r;
      r.run = strs.str(it.run);
      r.iteration = it.number;
      r.mapping = strs.str(it.mapping);
      r.host = strs.str(pairs[pi].host);
      r.interface = strs.str(pairs[pi].iface);
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
      r.intent = intent[ii][pi];
      const Pair& p = pairs[pi];
      // Coming up: every layer the pair is probed on that was not up at the command must have
      // come up (RDMA always: its first traffic); nothing to bring up and nothing came up:
      // unaffected.
      bool came_up = true, expected = p.has_rdma, any_up = ps.resumed.has_value();
      if (r.intent == Intent::kUp) {
        const std::array<bool, kLayerCount> probed = {p.has_light, p.has_firmware, p.has_carrier};
        for (int l = 0; l < kLayerCount; ++l) {
          any_up = any_up || ps.up[l].has_value();
          if (!probed[l] || (it.issued && state_before(pi, l, *it.issued) == 1)) continue;
          expected = true;
          came_up = came_up && ps.up[l].has_value();
          r.awaited |= static_cast<uint8_t>(1u << l);  // kLight, kFirmwareLayer, kCarrierLayer: bits 1, 2, 4
        }
        came_up = came_up && (!p.has_rdma || ps.resumed);
        if (p.has_rdma) r.awaited |= kAwaitedRdma;
      }
      bool went_down = ps.stalled.has_value();
      bool stayed_down = ps.stalled && !ps.resumed;
      for (int l = 0; l < kLayerCount; ++l) {
        went_down = went_down || ps.down[l].has_value();
        stayed_down = stayed_down || (ps.down[l] && !ps.up[l]);
      }
      if (any_command && !(it.ack && it.ack->second)) {
        r.status = Status::kFailed;
      } else if (r.intent == Intent::kUp) {
        r.status = !expected && !any_up ? Status::kUnaffected : came_up ? Status::kOk : Status::kIncomplete;
      } else if (r.intent == Intent::kDark) {
        r.status = Status::kDisconnected;
      } else if (!went_down) {
        r.status = Status::kUnaffected;
      } else if (stayed_down) {
        r.status = Status::kIncomplete;
      } else {
        r.status = Status::kOk;
      }
      // The host's capture ended before the command: whatever the switch side saw, the host's own
      // layers were not observed (a failed command stays failed: that is the switch's).
      if (r.status != Status::kFailed && it.issued) {
        if (auto hb = tl.capture_lost_at(r.run, r.host); hb && *hb < *it.issued) {
          r.status = Status::kLost;
          r.capture_end_ns = hb;
        }
      }
      out.rows.push_back(std::move(r));
    }
  }
  return out;
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
    csv.row(f);
  }
  csv.flush();
}

}  // namespace ocslab::analysis
