#include "ocslab/runner/fault_injection.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/file.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/vlab/lab_timing.h"

namespace ocslab::runner {

namespace {

// The supervisor answers in milliseconds; 10 s is `ocslab vlab timing`'s own limit.
constexpr std::chrono::seconds kApplyWait{10};

std::string nic_name(const ExperimentSpec& spec, const FaultSpec& f) { return spec.hosts[f.host].name + ":" + f.nic; }

template <class T>
void add_once(std::vector<T>& set, const T& v) {
  if (std::find(set.begin(), set.end(), v) == set.end()) set.push_back(v);
}

}  // namespace

FaultInjector::FaultInjector(const ExperimentSpec& spec, std::string lab_dir, Row row, Log log, std::string journal,
                             Kill kill)
    : spec_(spec),
      lab_dir_(std::move(lab_dir)),
      row_(std::move(row)),
      log_(std::move(log)),
      kill_(std::move(kill)),
      journal_(std::move(journal)),
      applied_(spec.faults.size()) {}

void FaultInjector::save_journal() {
  if (journal_.empty()) return;
  nlohmann::json j = {{"lab_dir", lab_dir_},
                      {"found_held_down", found_},
                      {"found_dark_ports", found_dark_},
                      {"faults", record()}};
  try {
    write_text(journal_, j.dump(2) + "\n");
  } catch (const std::exception& e) {
    log_(std::string("the fault journal (what `ocslab recover` would undo) was not written: ") + e.what());
  }
}

FaultInjector::~FaultInjector() {
  try {
    for (const auto& p : release()) log_(p);
  } catch (const std::exception& e) {
    log_(std::string("releasing the injected faults: ") + e.what());
  }
}

Sample FaultInjector::row(const ExperimentSpec& spec, const FaultSpec& f, bool on, int64_t t_ns) {
  if (f.kind == kSwitchUnreachable) return Sample{t_ns, 0, "switch", "fault", "control", "unreachable", on ? 1.0 : 0.0, "bool"};
  if (f.kind == kPortDark) return Sample{t_ns, 0, "switch", "fault", fmt::format("port {}", f.port), "dark", on ? 1.0 : 0.0, "bool"};
  if (f.kind == kCircuitCut) return Sample{t_ns, 0, "switch", "fault", fmt::format("port {}", f.port), "cut", on ? 1.0 : 0.0, "bool"};
  if (f.kind == kAgentKilled) return Sample{t_ns, 0, spec.hosts[f.host].name, "fault", "agent", "killed", on ? 1.0 : 0.0, "bool"};
  if (f.kind == kRankKilled) {
    return Sample{t_ns, 0, spec.hosts[f.host].name, "fault", fmt::format("rank {}", f.rank), "killed", on ? 1.0 : 0.0,
                  "bool"};
  }
  return Sample{t_ns, 0, spec.hosts[f.host].name, "fault", f.nic, "held_down", on ? 1.0 : 0.0, "bool"};
}

std::string FaultInjector::describe(const ExperimentSpec& spec, const FaultSpec& f) {
  if (f.kind == kSwitchUnreachable) return fmt::format("{} for {} ms", f.kind, f.for_ms);
  if (f.kind == kAgentKilled) return fmt::format("{} on {}", f.kind, spec.hosts[f.host].name);
  if (f.kind == kRankKilled) return fmt::format("{} on rank {} ({})", f.kind, f.rank, spec.hosts[f.host].name);
  if (f.kind != kPortDark && f.kind != kCircuitCut) return fmt::format("{} on {}", f.kind, nic_name(spec, f));
  const auto& nics = spec.hosts[f.host].nics;
  auto n = std::find_if(nics.begin(), nics.end(), [&](const NicEntry& e) { return e.name == f.nic; });
  const char* side = n != nics.end() && n->tx_port == f.port ? "tx" : "rx";
  return fmt::format("{} on switch port {} ({} {})", f.kind, f.port, nic_name(spec, f), side);
}

bool FaultInjector::ends_by_itself(const FaultSpec& f) {
  return f.kind == kSwitchUnreachable || f.kind == kCircuitCut || (f.kind == kPortDark && f.for_ms > 0);
}

std::string FaultInjector::lasts(const FaultSpec& f) {
  if (f.kind == kSwitchUnreachable || (f.kind == kPortDark && f.for_ms > 0))
    return fmt::format("ends by itself after {} ms", f.for_ms);
  if (f.kind == kCircuitCut) return fmt::format("made again {} ms after the deletion's acknowledgement", f.for_ms);
  if (f.kind == kAgentKilled) return "not undone: the host is lost for the rest of the run";
  if (f.kind == kRankKilled) return "not undone: the job goes on without it or stops";
  return "released when the run ends";
}

std::string FaultInjector::when(const FaultSpec& f) {
  if (f.at_step >= 0) return fmt::format("at step {}", f.at_step);
  if (f.after_s > 0) return fmt::format("{} s after the ranks started", f.after_s);
  return fmt::format("before reconfiguration {}", f.before_iteration);
}

vlab::LabTiming FaultInjector::lab_timing_for(size_t k) const {
  const FaultSpec& f = spec_.faults[k];
  vlab::LabTiming t;  // a spell leaves the holds and dark ports as they are
  if (f.kind == kSwitchUnreachable) {
    t.unreachable_ms = fmt::format("{}", f.for_ms);
  } else if (f.kind == kPortDark && f.for_ms > 0) {
    t.dark_spell_ports = {static_cast<int>(f.port)};
    t.dark_spell_ms = fmt::format("{}", f.for_ms);
  } else {
    return lab_set(k);
  }
  return t;
}

vlab::LabTiming FaultInjector::lab_set(size_t adding) const {
  vlab::LabTiming t;
  t.hold_down = found_;
  t.dark_ports = found_dark_;
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    if (!applied_[k].held_ns && k != adding) continue;
    const FaultSpec& f = spec_.faults[k];
    if (f.kind == kSwitchUnreachable || f.kind == kAgentKilled || f.kind == kRankKilled || f.kind == kCircuitCut ||
        ends_by_itself(f))
      continue;  // not a lab state the run holds
    if (f.kind == kPortDark) {
      add_once(*t.dark_ports, static_cast<int>(f.port));
    } else {
      add_once(*t.hold_down, nic_name(spec_, f));
    }
  }
  return t;
}

std::vector<std::string> FaultInjector::before_reconfiguration(int i) {
  std::vector<std::string> problems;
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    if (spec_.faults[k].before_iteration != i) continue;
    if (auto p = inject(k, when(spec_.faults[k]))) problems.push_back(*p);
  }
  return problems;
}

std::optional<std::string> FaultInjector::inject(size_t k, const std::string& when) {
  const FaultSpec& f = spec_.faults.at(k);
  const std::string what = describe(spec_, f);
  if (f.kind == kCircuitCut) return inject_cut(k, when);
  if (f.kind == kAgentKilled || f.kind == kRankKilled) {
    inject_kill(k, when);
    if (applied_[k].error.empty()) return std::nullopt;
    return fmt::format("fault {} {} not injected: {}", what, when, applied_[k].error);
  }
  try {
    if (!found_read_) {
      vlab::TimingState now = vlab::lab_timing(lab_dir_);
      found_ = now.held_down;
      found_dark_ = now.dark_ports;
      found_read_ = true;
    }
    applied_[k].asked_ns = realtime_ns();
    save_journal();  // before the lab changes: a runner that dies now leaves it undoable
    vlab::set_lab_timing(lab_dir_, lab_timing_for(k), kApplyWait);
    applied_[k].held_ns = realtime_ns();
    if (ends_by_itself(f)) applied_[k].released_ns = applied_[k].held_ns + static_cast<int64_t>(f.for_ms * 1e6);
    save_journal();
    row_(row(spec_, f, true, applied_[k].held_ns));
    // Not "fault:": that prefix is the localisation's verdict at the end of a run.
    if (f.kind == kSwitchUnreachable) {
      log_(fmt::format("injected {} {} (its control plane answers nothing until then)", what, when));
    } else if (ends_by_itself(f)) {
      log_(fmt::format("injected {} {} (no light passes the port for {} ms)", what, when, f.for_ms));
    } else {
      log_(fmt::format("injected {} {} ({} until the run ends)", what, when,
                       f.kind == kPortDark ? "no light passes the port" : "its link stays down"));
    }
  } catch (const std::exception& e) {
    applied_[k].error = e.what();
    return fmt::format("fault {} {} not injected: {}", what, when, e.what());
  }
  return std::nullopt;
}

void FaultInjector::inject_kill(size_t k, const std::string& when) {
  const FaultSpec& f = spec_.faults[k];
  applied_[k].asked_ns = realtime_ns();
  save_journal();
  try {
    if (!kill_) throw Error("this run cannot kill processes");
    kill_(f);
  } catch (const std::exception& e) {
    applied_[k].error = e.what();
    save_journal();
    return;
  }
  applied_[k].held_ns = realtime_ns();
  save_journal();
  row_(row(spec_, f, true, applied_[k].held_ns));
  log_(fmt::format("injected {} {} (SIGKILL; {})", describe(spec_, f), when, lasts(f)));
}

std::optional<std::string> FaultInjector::inject_cut(size_t k, const std::string& when) {
  const FaultSpec& f = spec_.faults[k];
  Applied& a = applied_[k];
  const std::string what = describe(spec_, f);
  try {
    if (!make_driver_) throw Error("this run has no switch session to cut a circuit with");
    auto driver = make_driver_();
    for (const auto& c : driver->list()) {
      if (c.ingress == f.port || c.egress == f.port) a.cut.push_back(c);
    }
    if (a.cut.empty()) throw Error(fmt::format("switch port {} has no circuit to cut", f.port));
    a.asked_ns = realtime_ns();
    save_journal();  // before the switch changes: the journal names the circuits to make again
    driver->disconnect({f.port});
    a.held_ns = realtime_ns();
    const auto back_at = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(f.for_ms * 1e3));
    save_journal();
    row_(row(spec_, f, true, a.held_ns));
    std::string circuits;
    for (const auto& c : a.cut) circuits += (circuits.empty() ? "" : ", ") + ocs::to_string(c);
    log_(fmt::format("injected {} {} (circuit {} deleted; made again after {} ms)", what, when, circuits, f.for_ms));
    std::this_thread::sleep_until(back_at);
    driver->connect(a.cut);
    a.released_ns = realtime_ns();
    a.cut.clear();
    save_journal();
    row_(row(spec_, f, false, a.released_ns));
  } catch (const std::exception& e) {
    a.error = e.what();
    save_journal();
    if (a.held_ns && !a.released_ns) {
      return fmt::format("fault {} {}: the circuit was not made again ({}); the run tries once more when it ends",
                         what, when, e.what());
    }
    return fmt::format("fault {} {} not injected: {}", what, when, e.what());
  }
  return std::nullopt;
}

std::vector<std::string> FaultInjector::release() {
  std::vector<std::string> problems;
  for (size_t k = 0; k < spec_.faults.size(); ++k) {  // a cut circuit not made again: once more
    Applied& a = applied_[k];
    if (spec_.faults[k].kind != kCircuitCut || a.cut.empty() || !a.held_ns || a.released_ns) continue;
    try {
      if (!make_driver_) throw Error("no switch session");
      make_driver_()->connect(a.cut);
      a.released_ns = realtime_ns();
      a.cut.clear();
      row_(row(spec_, spec_.faults[k], false, a.released_ns));
    } catch (const std::exception& e) {
      std::string circuits;
      for (const auto& c : a.cut) circuits += (circuits.empty() ? "" : " ") + ocs::to_string(c);
      problems.push_back(fmt::format("the circuit(s) {} cut by {} were not made again (`ocsctl connect {}`): {}",
                                     circuits, describe(spec_, spec_.faults[k]), circuits, e.what()));
    }
    save_journal();
  }
  auto lab = release_lab();
  problems.insert(problems.end(), lab.begin(), lab.end());
  return problems;
}

std::vector<std::string> FaultInjector::release_lab() {
  if (released_ || !found_read_) return {};
  released_ = true;
  vlab::LabTiming t;
  t.hold_down = found_;
  t.dark_ports = found_dark_;
  try {
    vlab::set_lab_timing(lab_dir_, t, kApplyWait);
  } catch (const std::exception& e) {
    for (auto& a : applied_) {
      if (a.held_ns) a.error = std::string("release failed: ") + e.what();
    }
    return {std::string("the injected faults were not released (the lab's NICs may still be held down and its "
                        "ports dark; `ocslab vlab timing LAB --release-all`): ") +
            e.what()};
  }
  const int64_t now = realtime_ns();
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    const auto& kind = spec_.faults[k].kind;
    if (!applied_[k].held_ns || kind == kAgentKilled || kind == kRankKilled || kind == kCircuitCut)
      continue;  // a killed process stays dead; a cut circuit was made again (or said so)
    // A spell ended by itself: its end is when it was due.
    if (!ends_by_itself(spec_.faults[k])) applied_[k].released_ns = now;
    row_(row(spec_, spec_.faults[k], false, applied_[k].released_ns));
  }
  save_journal();
  log_("faults released: the lab's NIC holds and dark ports are as the run found them");
  return {};
}

int64_t FaultInjector::injected_ns(int i) const {
  int64_t first = 0;
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    const int64_t t = applied_[k].held_ns ? applied_[k].asked_ns : 0;
    if (spec_.faults[k].before_iteration == i && t && (!first || t < first)) first = t;
  }
  return first;
}

nlohmann::json FaultInjector::release_journal(const std::string& journal, std::vector<std::string>& problems,
                                              const Log& log) {
  auto text = read_file_or_empty(journal);
  if (text.empty()) return nlohmann::json::array();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    nlohmann::json& faults = j.at("faults");
    // Applied (or asked for when the runner died) and not released; a spell ends by itself.
    auto pending = [](const nlohmann::json& f) {
      return (f.value("held_ns", int64_t{0}) || f.value("asked_ns", int64_t{0})) && !f.value("released_ns", int64_t{0}) &&
             f.value("kind", "") != kSwitchUnreachable && f.value("kind", "") != kAgentKilled &&
             f.value("kind", "") != kRankKilled && f.value("kind", "") != kCircuitCut &&
             !(f.value("kind", "") == kPortDark && f.value("for_ms", 0.0) > 0);
    };
    if (std::none_of(faults.begin(), faults.end(), pending)) return faults;
    vlab::LabTiming t;
    t.hold_down = j.at("found_held_down").get<std::vector<std::string>>();
    t.dark_ports = j.at("found_dark_ports").get<std::vector<int>>();
    const std::string lab_dir = j.at("lab_dir").get<std::string>();
    try {
      vlab::set_lab_timing(lab_dir, t, kApplyWait);
    } catch (const std::exception& e) {
      problems.push_back(fmt::format("the faults the run injected were not released (`ocslab vlab timing LAB "
                                     "--release-all`): {}",
                                     e.what()));
      return faults;
    }
    const int64_t now = realtime_ns();
    for (auto& f : faults) {
      if (pending(f)) {
        f["released_ns"] = now;
        f["released"] = iso_time(now);
        f["released_by"] = "ocslab recover";
      }
    }
    write_text(journal, j.dump(2) + "\n");
    log("faults released by `ocslab recover`: the lab's NIC holds and dark ports are as the run found them");
    return faults;
  } catch (const nlohmann::json::exception& e) {
    problems.push_back(fmt::format("{}: not a fault journal ({}): the lab's holds and dark ports were not checked; "
                                   "`ocslab vlab timing LAB` shows them",
                                   journal, e.what()));
    return nlohmann::json::array();
  }
}

nlohmann::json FaultInjector::record() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < spec_.faults.size(); ++k) {
    const FaultSpec& f = spec_.faults[k];
    const Applied& a = applied_[k];
    out.push_back({{"kind", f.kind},
                   {"host", f.kind == kSwitchUnreachable ? std::string() : spec_.hosts[f.host].name},
                   {"nic", f.nic},
                   {"port", f.port},
                   {"for_ms", f.for_ms},
                   {"before_iteration", f.before_iteration},
                   {"rank", f.rank},
                   {"at_step", f.at_step},
                   {"after_s", f.after_s},
                   {"asked_ns", a.asked_ns},
                   {"where", f.where},
                   {"held_ns", a.held_ns},
                   {"held", a.held_ns ? iso_time(a.held_ns) : std::string()},
                   {"released_ns", a.released_ns},
                   {"released", a.released_ns ? iso_time(a.released_ns) : std::string()},
                   {"error", a.error}});
    if (f.kind == kCircuitCut && !a.cut.empty()) {  // deleted and not (yet) made again
      nlohmann::json cut = nlohmann::json::array();
      for (const auto& c : a.cut) cut.push_back(ocs::to_string(c));
      out.back()["not_remade"] = cut;
    }
  }
  return out;
}

}  // namespace ocslab::runner
