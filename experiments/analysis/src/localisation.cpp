#include "ocslab/analysis/localisation.h"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace ocslab::analysis {

const char* chain_layer_name(ChainLayer l) {
  switch (l) {
    case ChainLayer::kSwitch:
      return "switch";
    case ChainLayer::kLight:
      return "light";
    case ChainLayer::kFirmware:
      return "firmware";
    case ChainLayer::kCarrier:
      return "carrier";
    case ChainLayer::kRdma:
      return "rdma";
    case ChainLayer::kCapture:
      return "capture";
  }
  return "?";
}

namespace {

constexpr std::array<ChainLayer, 4> kPortLayers = {ChainLayer::kLight, ChainLayer::kFirmware, ChainLayer::kCarrier,
                                                   ChainLayer::kRdma};

// A port layer's down and up edges.
std::pair<Edge, Edge> edges_of(ChainLayer l) {
  switch (l) {
    case ChainLayer::kLight:
      return {kLightLost, kLightBack};
    case ChainLayer::kFirmware:
      return {kFirmwareDown, kFirmwareUp};
    case ChainLayer::kCarrier:
      return {kCarrierDown, kCarrierUp};
    case ChainLayer::kRdma:
      return {kRdmaStalled, kRdmaResumed};
    case ChainLayer::kSwitch:
    case ChainLayer::kCapture:
      break;
  }
  return {kIssued, kAcked};
}

uint8_t awaited_bit(ChainLayer l) { return static_cast<uint8_t>(1u << (static_cast<int>(l) - 1)); }

// The words for a layer's edges in the evidence.
std::pair<const char*, const char*> edge_words(ChainLayer l) {
  switch (l) {
    case ChainLayer::kLight:
      return {"lost", "back"};
    case ChainLayer::kRdma:
      return {"stalled", "resumed"};
    default:
      return {"down", "up"};
  }
}

// The last layer edge a row saw (issued and acked are the switch's, not the port's; the polled
// carrier bit is no layer of the chain).
std::optional<int64_t> last_edge(const BreakdownRow& r) {
  std::optional<int64_t> t;
  for (int e = kLightLost; e <= kRdmaResumed; ++e)
    if (r.edges[e] && (!t || *r.edges[e] > *t)) t = r.edges[e];
  return t;
}

bool takes_part(const BreakdownRow& r) { return r.status != Status::kUnaffected && r.status != Status::kDisconnected; }

// A timeline row to find by its time, host, interface and layer; `up`: the state it reports.
struct Wanted {
  int64_t t = 0;
  std::string host, interface;
  ChainLayer layer = ChainLayer::kLight;
  bool up = false;
  uint32_t line = 0;
  bool exact = false;  // the state matched too (a candidate that did not is kept until one does)
};

bool kind_in_layer(Kind k, ChainLayer l, bool up) {
  switch (l) {
    case ChainLayer::kLight:
      return k == Kind::kLightEmulator || k == Kind::kLightOcsPower || k == Kind::kRxPower;
    case ChainLayer::kFirmware:
      return k == Kind::kLinkEmulator || k == Kind::kLinkFirmware;
    case ChainLayer::kCarrier:
      return k == Kind::kCarrier;
    case ChainLayer::kRdma:
      return k == (up ? Kind::kResumed : Kind::kStalled);
    case ChainLayer::kSwitch:
      return k == (up ? Kind::kAck : Kind::kCommand);
    case ChainLayer::kCapture:  // heartbeats are not events
      break;
  }
  return false;
}

// The line of every wanted row, in one pass over the timeline: the first row in file order of
// that time, host, interface and layer, preferring one whose state matches (rx_power's dBm has
// no state without the dark threshold: any of its rows matches).
void find_lines(const Timeline& tl, std::vector<Wanted>& wanted) {
  if (wanted.empty()) return;
  std::unordered_multimap<int64_t, size_t> by_time;
  for (size_t i = 0; i < wanted.size(); ++i) by_time.emplace(wanted[i].t, i);
  for (const Event& e : tl.events) {
    auto [lo, hi] = by_time.equal_range(e.t_ns);
    for (auto it = lo; it != hi; ++it) {
      Wanted& w = wanted[it->second];
      if (w.exact || !kind_in_layer(e.kind, w.layer, w.up)) continue;
      if (w.layer != ChainLayer::kSwitch &&
          (tl.strings.str(e.host) != w.host || tl.strings.str(e.subject) != w.interface))
        continue;
      bool state = e.kind == Kind::kRxPower || e.kind == Kind::kStalled || e.kind == Kind::kResumed ||
                   e.kind == Kind::kCommand || e.kind == Kind::kAck || (e.value != 0) == w.up;
      if (state || w.line == 0) w.line = e.line;
      w.exact = state;
    }
  }
}

// The switch's first ack at or after a command in its reconfiguration (with an iteration
// column: the same run and iteration; without: before the next command).
struct AckSearch {
  std::string run;
  int iteration = 0;
  int64_t issued = 0;
  std::optional<int64_t> before;  // the next command
  std::optional<int64_t> t;
  double value = 0;
  uint32_t line = 0;
};

void find_acks(const Timeline& tl, std::vector<AckSearch>& acks) {
  if (acks.empty()) return;
  for (const Event& e : tl.events) {
    if (e.kind != Kind::kAck) continue;
    for (AckSearch& a : acks) {
      if (e.t_ns < a.issued || (a.t && e.t_ns >= *a.t)) continue;
      if (tl.has_iteration ? (e.iteration != a.iteration || tl.strings.str(e.run) != a.run)
                           : (a.before && e.t_ns >= *a.before))
        continue;
      a.t = e.t_ns;
      a.value = e.value;
      a.line = e.line;
    }
  }
}

// Builds one localisation's text: the verdict and the evidence.
class Explainer {
 public:
  Explainer(Localisation& l, const std::vector<const BreakdownRow*>& rows, const BreakdownRow& fault)
      : l_(l), rows_(rows), fault_(fault) {}

  // "+12.000 ms" from the localisation's reference; the raw stamp where there is none.
  std::string at(int64_t t) const {
    int64_t d = 0;
    if (!l_.t0_ns || __builtin_sub_overflow(t, *l_.t0_ns, &d)) return fmt::format("t_ns {}", t);
    return fmt::format("{:+.3f} ms", static_cast<double>(d) / 1e6);
  }

  std::string name() const { return l_.host + "/" + l_.interface; }

  void verdict() {
    if (l_.layer == ChainLayer::kCapture) {
      std::string port = l_.port ? fmt::format(" (switch ports tx {} rx {})", l_.port->tx, l_.port->rx) : "";
      l_.verdict = fmt::format("{}{}: no capture, {}'s agent was lost before the command; {} of {} port(s) resumed",
                               name(), port, l_.host, l_.resumed, l_.ports);
      if (l_.stopped.size() > 1) l_.verdict += fmt::format(", {} more stopped", l_.stopped.size() - 1);
    } else if (l_.layer == ChainLayer::kSwitch) {
      l_.verdict = fmt::format(
          "the switch did not acknowledge the command: all {} port(s) failed; not one host's fault", l_.ports);
    } else if (l_.common) {
      l_.verdict = fmt::format(
          "every one of the {} ports stopped at {}, {} first: a cause they share (the switch, "
          "the light path), not one host",
          l_.ports, chain_layer_name(l_.layer), name());
    } else {
      std::string port = l_.port ? fmt::format(" (switch ports tx {} rx {})", l_.port->tx, l_.port->rx) : "";
      l_.verdict = fmt::format("{}{} stopped at {}; {} of {} port(s) resumed", name(), port, chain_layer_name(l_.layer),
                               l_.resumed, l_.ports);
      if (l_.stopped.size() > 1) l_.verdict += fmt::format(", {} more stopped", l_.stopped.size() - 1);
    }
  }

  // The evidence lines and the rows to look up for them (the index of the line each fills).
  void own_chain(std::vector<Wanted>& wanted, std::vector<size_t>& wanted_evidence) {
    const bool up = fault_.intent == Intent::kUp;
    for (ChainLayer layer : kPortLayers) {
      if (layer > l_.layer) break;
      auto [down_edge, up_edge] = edges_of(layer);
      auto [down_word, up_word] = edge_words(layer);
      const auto& down = fault_.edges[down_edge];
      const auto& back = fault_.edges[up_edge];
      const bool awaited = fault_.awaited == 0 || (fault_.awaited & awaited_bit(layer));
      std::string text;
      std::optional<int64_t> row_t;
      bool row_up = false;
      if (layer < l_.layer) {
        if (!down && !back) continue;
        text = name() + " " + chain_layer_name(layer);
        if (down) text += fmt::format(" {} at {}", down_word, at(*down));
        if (back) text += fmt::format("{} {} at {}", down ? "," : "", up_word, at(*back));
        row_t = back ? back : down;
        row_up = back.has_value();
      } else if (up) {
        if (!awaited) continue;
        text = fmt::format("{} {} never came {} after the command (the port was coming up)", name(),
                           chain_layer_name(layer), up_word);
      } else {
        text = fmt::format("{} {} {} at {}, never {} in the reconfiguration", name(), chain_layer_name(layer),
                           down_word, down ? at(*down) : "?", up_word);
        row_t = down;
      }
      l_.evidence.push_back({0, text});
      if (row_t) {
        wanted.push_back({*row_t, l_.host, l_.interface, layer, row_up, 0, false});
        wanted_evidence.push_back(l_.evidence.size() - 1);
      }
    }
  }

  // A lost row: when its host's capture ended, and how many of the others were observed.
  void capture() {
    if (fault_.capture_end_ns) {
      l_.evidence.push_back({0, fmt::format("{}'s last heartbeat at {}, before the command: nothing from {} after it",
                                            l_.host, at(*fault_.capture_end_ns), l_.host)});
    }
    size_t others = 0, observed = 0;
    for (const BreakdownRow* r : rows_) {
      if (r == &fault_ || !takes_part(*r)) continue;
      ++others;
      observed += r->status != Status::kLost;
    }
    l_.evidence.push_back(
        {0, fmt::format("{} of {} other port(s) were observed through the reconfiguration", observed, others)});
  }

  // What the other ports that took part did at the layer the fault stopped at.
  void peers() {
    const Edge up_edge = edges_of(l_.layer).second;
    size_t others = 0, reached = 0;
    std::optional<int64_t> first, last;
    for (const BreakdownRow* r : rows_) {
      if (r == &fault_ || !takes_part(*r)) continue;
      ++others;
      if (const auto& t = r->edges[up_edge]) {
        ++reached;
        first = first ? std::min(*first, *t) : *t;
        last = last ? std::max(*last, *t) : *t;
      }
    }
    const char* layer = chain_layer_name(l_.layer);
    const char* up = edge_words(l_.layer).second;
    if (others == 0) {
      l_.evidence.push_back({0, fmt::format("no other port took part in this reconfiguration")});
    } else if (reached == 0) {
      l_.evidence.push_back({0, fmt::format("none of the {} other port(s) reached {} {} either", others, layer, up)});
    } else {
      std::string when = at(*first);
      int64_t a = 0, b = 0;
      if (*first != *last && l_.t0_ns && !__builtin_sub_overflow(*first, *l_.t0_ns, &a) &&
          !__builtin_sub_overflow(*last, *l_.t0_ns, &b))
        when = fmt::format("{:+.3f}..{:+.3f} ms", static_cast<double>(a) / 1e6, static_cast<double>(b) / 1e6);
      else if (*first != *last)
        when += ".." + at(*last);
      l_.evidence.push_back({0, fmt::format("{} of {} other port(s) reached {} {} at {}; {} never did", reached, others,
                                            layer, up, when, name())});
    }
    if (l_.stopped.size() > 1) {
      std::string also;
      constexpr size_t kNamed = 8;
      for (size_t i = 1; i < l_.stopped.size() && i <= kNamed; ++i) {
        const StoppedPort& s = l_.stopped[i];
        also += fmt::format("{}{}/{} at {}", also.empty() ? "" : ", ", s.host, s.interface, chain_layer_name(s.layer));
      }
      if (l_.stopped.size() > kNamed + 1) also += fmt::format(" and {} more", l_.stopped.size() - kNamed - 1);
      l_.evidence.push_back({0, "also stopped: " + also});
    }
  }

 private:
  Localisation& l_;
  const std::vector<const BreakdownRow*>& rows_;
  const BreakdownRow& fault_;
};

}  // namespace

std::optional<ChainLayer> stopped_layer(const BreakdownRow& r) {
  if (r.status == Status::kFailed) return ChainLayer::kSwitch;
  if (r.status == Status::kLost) return ChainLayer::kCapture;
  if (r.status != Status::kIncomplete) return std::nullopt;
  for (ChainLayer l : kPortLayers) {
    auto [down, up] = edges_of(l);
    if (r.intent == Intent::kUp) {
      // Coming up: the first awaited layer that did not come up (all of them when the row does
      // not say which were awaited).
      if ((r.awaited == 0 || (r.awaited & awaited_bit(l))) && !r.edges[up]) return l;
    } else if (r.edges[down] && !r.edges[up]) {
      return l;
    }
  }
  return ChainLayer::kRdma;  // not reached for a row compute_breakdown made
}

std::vector<Localisation> localise(const Breakdown& b, const Timeline* timeline,
                                   const std::map<Endpoint, SwitchPorts>* ports) {
  // The rows of each reconfiguration, in the breakdown's order.
  std::map<std::pair<std::string, int>, std::vector<const BreakdownRow*>> groups;
  for (const auto& r : b.rows) groups[{r.run, r.iteration}].push_back(&r);
  std::vector<int64_t> commands;  // every command, to bound an ack search without an iteration column
  for (const auto& [key, rows] : groups)
    if (rows.front()->edges[kIssued]) commands.push_back(*rows.front()->edges[kIssued]);
  std::sort(commands.begin(), commands.end());

  std::vector<Localisation> out;
  std::vector<Wanted> wanted;
  std::vector<std::pair<size_t, size_t>> wanted_at;  // (localisation, evidence) each wanted row fills
  std::vector<AckSearch> acks;
  std::vector<std::pair<size_t, size_t>> ack_at;
  for (const auto& [key, rows] : groups) {
    std::vector<std::pair<StoppedPort, const BreakdownRow*>> stopped;
    Localisation l;
    for (const BreakdownRow* r : rows) {
      l.ports += takes_part(*r);
      l.resumed += r->status == Status::kOk;
      if (auto layer = stopped_layer(*r)) stopped.push_back({{r->host, r->interface, *layer, last_edge(*r)}, r});
      for (int e = kLightLost; e <= kRdmaResumed; ++e)
        if (r->edges[e] && (!l.t0_ns || *r->edges[e] < *l.t0_ns)) l.t0_ns = r->edges[e];
    }
    if (stopped.empty()) continue;
    // The earliest divergence first: the lowest layer, then the earliest last edge (none at all
    // is earliest), then host and interface.
    std::stable_sort(stopped.begin(), stopped.end(), [](const auto& a, const auto& b) {
      return std::make_tuple(a.first.layer, a.first.last_edge_ns.has_value(), a.first.last_edge_ns.value_or(0)) <
             std::make_tuple(b.first.layer, b.first.last_edge_ns.has_value(), b.first.last_edge_ns.value_or(0));
    });
    const BreakdownRow& fault = *stopped.front().second;
    l.run = key.first;
    l.iteration = key.second;
    l.mapping = fault.mapping;
    l.host = fault.host;
    l.interface = fault.interface;
    l.layer = stopped.front().first.layer;
    if (fault.edges[kIssued]) l.t0_ns = fault.edges[kIssued];
    if (ports) {
      if (auto it = ports->find(Endpoint{l.host, l.interface}); it != ports->end()) l.port = it->second;
    }
    for (const auto& s : stopped) l.stopped.push_back(s.first);
    const bool same =
        std::all_of(l.stopped.begin(), l.stopped.end(), [&](const StoppedPort& s) { return s.layer == l.layer; });
    l.common = l.layer == ChainLayer::kSwitch ||
               (l.layer != ChainLayer::kCapture && same && l.stopped.size() >= 2 && l.stopped.size() == l.ports);

    Explainer ex(l, rows, fault);
    ex.verdict();
    if (l.layer == ChainLayer::kSwitch) {
      if (fault.edges[kIssued]) {
        l.evidence.push_back({0, fmt::format("command to '{}' issued at {}", l.mapping, ex.at(*fault.edges[kIssued]))});
        wanted.push_back({*fault.edges[kIssued], "", "", ChainLayer::kSwitch, false, 0, false});
        wanted_at.emplace_back(out.size(), l.evidence.size() - 1);
        AckSearch a{l.run, l.iteration, *fault.edges[kIssued], std::nullopt, std::nullopt, 0, 0};
        auto next = std::upper_bound(commands.begin(), commands.end(), a.issued);
        if (next != commands.end()) a.before = *next;
        acks.push_back(a);
        l.evidence.push_back({0, "no ack from the switch in the reconfiguration"});
        ack_at.emplace_back(out.size(), l.evidence.size() - 1);
      } else {
        l.evidence.push_back({0, "no ack from the switch in the reconfiguration"});
      }
    } else {
      std::vector<size_t> filled;
      ex.own_chain(wanted, filled);
      for (size_t e : filled) wanted_at.emplace_back(out.size(), e);
      if (l.layer == ChainLayer::kCapture) {
        ex.capture();
      } else {
        ex.peers();
      }
    }
    out.push_back(std::move(l));
  }

  if (timeline) {
    find_lines(*timeline, wanted);
    for (size_t i = 0; i < wanted.size(); ++i)
      out[wanted_at[i].first].evidence[wanted_at[i].second].line = wanted[i].line;
    find_acks(*timeline, acks);
    for (size_t i = 0; i < acks.size(); ++i) {
      const AckSearch& a = acks[i];
      if (!a.t) continue;
      Localisation& l = out[ack_at[i].first];
      int64_t d = 0;
      std::string when = l.t0_ns && !__builtin_sub_overflow(*a.t, *l.t0_ns, &d)
                             ? fmt::format("{:+.3f} ms", static_cast<double>(d) / 1e6)
                             : fmt::format("t_ns {}", *a.t);
      l.evidence[ack_at[i].second] = {a.line, fmt::format("the switch answered ack {} at {}", a.value, when)};
    }
  }
  return out;
}

}  // namespace ocslab::analysis
