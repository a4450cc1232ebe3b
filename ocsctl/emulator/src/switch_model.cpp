#include "ocslab/emulator/switch_model.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "ocslab/common/error.h"

namespace ocslab::emu {

namespace {

struct PresetEntry {
  const char* name;
  Distribution switching;
  const char* note;
};

// Switching times from docs/protocols.md#switching-and-link-up-times. Spreads are modest guesses around the published
// typical values; override with `switching:` in the lab file when you know your device.
const std::vector<PresetEntry>& presets() {
  static const std::vector<PresetEntry> p = {
      {"polatis-6000", Distribution::normal(25, 3, 15), "piezo beam steering, 25 ms"},
      {"mems-3d", Distribution::normal(10, 1.5, 5), "3D MEMS (Calient S320-like), 10 ms typical"},
      {"liquid-crystal", Distribution::normal(100, 5, 80), "liquid crystal, 100 ms"},
      {"rotor", Distribution::fixed(0.01), "rotor / free-space, 10 us"},
      {"robotic-patch-panel", Distribution::normal(120000, 10000, 90000), "robotic patch panel, 120 s"},
  };
  return p;
}

}  // namespace

std::vector<std::string> SwitchParams::preset_names() {
  std::vector<std::string> out;
  for (const auto& p : presets()) out.push_back(p.name);
  return out;
}

SwitchParams SwitchParams::preset(const std::string& name) {
  for (const auto& p : presets()) {
    if (name == p.name) {
      SwitchParams s;
      s.switching = p.switching;
      if (name == "mems-3d") {
        s.vendor = "CALIENT";
        s.model = "S320";
      } else if (name != "polatis-6000") {
        s.vendor = "OCSLAB";
        s.model = name;
      }
      return s;
    }
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown switch preset '" + name + "' (known: " + known + ")");
}

SwitchModel::SwitchModel(boost::asio::io_context& io, SwitchParams params, GroundTruth& truth)
    : io_(io), params_(std::move(params)), truth_(truth), rng_(params_.seed) {
  if (params_.ingress_ports < 1 || params_.egress_ports < 1) {
    throw Error(fmt::format("switch size {}x{} is invalid", params_.ingress_ports, params_.egress_ports));
  }
}

double SwitchModel::source_dbm(Port ingress) const {
  auto it = params_.source_power_by_port.find(ingress);
  return it == params_.source_power_by_port.end() ? params_.source_power_dbm : it->second;
}

std::optional<Port> SwitchModel::owner(Port egress) const {
  auto it = owner_.find(egress);
  if (it == owner_.end()) return std::nullopt;
  return it->second;
}

std::optional<Port> SwitchModel::lit_path(Port ingress) const {
  auto it = mirrors_.find(ingress);
  if (it == mirrors_.end() || !it->second.egress || !it->second.settled) return std::nullopt;
  if (params_.blocking && any_moving()) return std::nullopt;
  if (closed_.count(ingress) || closed_.count(*it->second.egress)) return std::nullopt;
  return it->second.egress;
}

// An egress is configured from at most one ingress: connect refuses or replaces the other.
bool SwitchModel::lit(Port egress) const {
  auto in = owner(egress);
  return in && lit_path(*in).has_value();
}

double SwitchModel::power_dbm(Port p) const {
  if (is_ingress(p)) return closed_.count(p) ? params_.dark_floor_dbm : source_dbm(p);
  auto in = owner(p);
  if (in && lit_path(*in)) return source_dbm(*in) - params_.insertion_loss_db;
  return params_.dark_floor_dbm;
}

bool SwitchModel::settled(Port ingress) const {
  auto it = mirrors_.find(ingress);
  return it == mirrors_.end() || it->second.settled;
}

std::vector<Circuit> SwitchModel::circuits() const {
  std::vector<Circuit> out;
  for (const auto& [in, m] : mirrors_) {
    if (m.egress) out.push_back({in, *m.egress});
  }
  return out;
}

void SwitchModel::touch(Port ingress) {
  touched_in_.insert(ingress);
  auto it = mirrors_.find(ingress);
  if (it != mirrors_.end() && it->second.egress) touched_out_.insert(*it->second.egress);
}

// Announces every path and light change since the last call, in port order (all paths, then
// all lights), so the data plane and NIC link models see exactly the transitions (and nothing
// twice). Only the ports touched since then can have changed, unless the blocking fabric went
// dark or lit as a whole: a settle costs the same with 8 circuits as with 1024.
void SwitchModel::refresh_light() {
  const bool blocked = params_.blocking && any_moving();
  const bool all = blocked != blocked_;
  blocked_ = blocked;
  auto path_changed = [&](Port in) {
    auto now_path = lit_path(in);
    auto& last = paths_[in];
    if (now_path != last) {
      last = now_path;
      for (auto& fn : path_fns_) fn(in, now_path);
    }
  };
  auto light_changed = [&](Port out) {
    bool now_lit = lit(out);
    auto it = light_.find(out);
    bool was = it != light_.end() && it->second;
    if (now_lit != was) {
      light_[out] = now_lit;
      double dbm = power_dbm(out);
      truth_.record("switch", fmt::format("port {}", out), "light", now_lit ? 1 : 0, "bool");
      truth_.record("switch", fmt::format("port {}", out), "power", dbm, "dBm");
      for (auto& fn : light_fns_) fn(out, now_lit, dbm);
    }
  };
  if (all) {
    for (Port in = 1; in <= params_.ingress_ports; ++in) path_changed(in);
    for (Port out = params_.ingress_ports + 1; out <= total_ports(); ++out) light_changed(out);
  } else {
    for (Port in : touched_in_) path_changed(in);
    for (Port out : touched_out_) light_changed(out);
  }
  touched_in_.clear();
  touched_out_.clear();
}

std::optional<ModelError> SwitchModel::connect(const std::vector<Circuit>& circuits, std::function<void()> done) {
  std::set<Port> ins, outs;
  for (const auto& c : circuits) {
    if (!is_ingress(c.ingress)) return ModelError{ModelError::Kind::kInvalidPort, fmt::format("Invalid OXC port: {}", c.ingress)};
    if (!is_egress(c.egress)) return ModelError{ModelError::Kind::kInvalidPort, fmt::format("Invalid OXC port: {}", c.egress)};
    if (!ins.insert(c.ingress).second || !outs.insert(c.egress).second) {
      return ModelError{ModelError::Kind::kBadRequest, fmt::format("Port used twice in request: {}-{}", c.ingress, c.egress)};
    }
  }
  if (!params_.replace_patched) {
    for (const auto& c : circuits) {
      // The two circuits that can be in the way: the one on c's ingress and the one holding
      // c's egress. Reported as a scan in ingress order would meet them: the lower ingress first.
      auto it = mirrors_.find(c.ingress);
      const bool in_busy = it != mirrors_.end() && it->second.egress && *it->second.egress != c.egress;
      const auto holder = owner(c.egress);
      const bool out_busy = holder && *holder != c.ingress;
      if (in_busy && (!out_busy || c.ingress < *holder)) {
        return ModelError{ModelError::Kind::kPortInUse, fmt::format("Port already connected: {}", c.ingress)};
      }
      if (out_busy) {
        return ModelError{ModelError::Kind::kPortInUse, fmt::format("Port already connected: {}", c.egress)};
      }
    }
  }
  // All valid: every changed mirror moves at once (non-blocking fabric), each with its own
  // switching time; `done` fires when the last one settles.
  auto barrier = std::make_shared<Barrier>(io_, std::move(done));
  for (const auto& c : circuits) {
    // Replacing: a circuit that held the requested egress loses it.
    if (auto holder = owner(c.egress); holder && *holder != c.ingress) begin_move(*holder, std::nullopt, nullptr);
    auto it = mirrors_.find(c.ingress);
    if (it != mirrors_.end() && it->second.egress == c.egress) continue;  // already there
    begin_move(c.ingress, c.egress, barrier);
  }
  refresh_light();
  return std::nullopt;  // `done` runs once the last move settles (or at once if none moved)
}

SwitchModel::Barrier::~Barrier() {
  if (done) boost::asio::post(io, std::move(done));
}

void SwitchModel::begin_move(Port ingress, std::optional<Port> egress, const std::shared_ptr<Barrier>& barrier) {
  Mirror& m = mirrors_[ingress];
  ++m.generation;
  if (m.timer) m.timer->cancel();
  touch(ingress);  // the old egress goes dark
  if (m.egress) {
    if (!m.settled) --moving_;
    if (auto it = owner_.find(*m.egress); it != owner_.end() && it->second == ingress) owner_.erase(it);
  }
  m.egress = egress;
  m.settled = !egress.has_value();
  if (egress) {
    ++moving_;
    owner_[*egress] = ingress;
    touched_out_.insert(*egress);
  }
  if (!egress) {
    truth_.record("switch", fmt::format("{}", ingress), "circuit_removed", 1, "event");
    return;
  }
  auto delay = params_.switching.sample(rng_);
  truth_.record("switch", fmt::format("{}-{}", ingress, *egress), "switch_start", static_cast<double>(delay.count()) / 1e6, "ms");
  if (!m.timer) m.timer = std::make_unique<boost::asio::steady_timer>(io_);
  m.timer->expires_after(delay);
  uint64_t gen = m.generation;
  // Every pending settle holds the barrier; the last to finish (or be cancelled) releases it.
  m.timer->async_wait([this, ingress, gen, barrier](const boost::system::error_code& ec) {
    if (!ec) settle(ingress, gen);
  });
}

void SwitchModel::settle(Port ingress, uint64_t generation) {
  auto it = mirrors_.find(ingress);
  if (it == mirrors_.end() || it->second.generation != generation || !it->second.egress) return;
  if (it->second.settled) return;
  it->second.settled = true;
  --moving_;
  touch(ingress);
  truth_.record("switch", fmt::format("{}-{}", ingress, *it->second.egress), "switch_end", 1, "event");
  refresh_light();
}

std::optional<ModelError> SwitchModel::disconnect(const std::vector<Port>& ports) {
  for (Port p : ports) {
    if (!valid(p)) return ModelError{ModelError::Kind::kInvalidPort, fmt::format("Invalid OXC port: {}", p)};
  }
  std::set<Port> kill(ports.begin(), ports.end());
  for (auto& [in, m] : mirrors_) {
    if (!m.egress) continue;
    if (ports.empty() || kill.count(in) || kill.count(*m.egress)) begin_move(in, std::nullopt, nullptr);
  }
  refresh_light();
  return std::nullopt;
}

std::optional<ModelError> SwitchModel::set_shutter(const std::vector<Port>& ports, bool closed) {
  for (Port p : ports) {
    if (!valid(p)) return ModelError{ModelError::Kind::kInvalidPort, fmt::format("Invalid OXC port: {}", p)};
  }
  for (Port p : ports) {
    if (closed) closed_.insert(p);
    else closed_.erase(p);
    // A shutter darkens the circuit through the port, at either end.
    if (is_ingress(p)) {
      touch(p);
    } else if (auto in = owner(p)) {
      touch(*in);
    } else {
      touched_out_.insert(p);
    }
    truth_.record("switch", fmt::format("port {}", p), "shutter_closed", closed ? 1 : 0, "bool");
  }
  refresh_light();
  return std::nullopt;
}

}  // namespace ocslab::emu
