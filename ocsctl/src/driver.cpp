#include "ocslab/ocsctl/driver.h"

#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "string_reuse.h"

namespace ocslab::ocs {

namespace {

std::string circuits_text(const std::vector<Circuit>& cs) {
  std::string out;
  for (const auto& c : cs) out += (out.empty() ? "" : " ") + to_string(c);
  return out.empty() ? "none" : out;
}

}  // namespace

OcsDriver::OcsDriver(SwitchUrl url, DriverOptions options) : url_(std::move(url)), options_(std::move(options)) {}

OcsDriver::~OcsDriver() = default;

// stamp_issued() sets every field of the record it reuses: a new field must be set there too.
static_assert(sizeof(CallTiming) == 3 * sizeof(std::string) + 2 * sizeof(Timestamp) + alignof(CallTiming),
              "CallTiming changed: update OcsDriver::stamp_issued");

Timestamp OcsDriver::stamp_issued(std::string_view command) {
  CallTiming& t = current();
  if (t.op != op_) assign_reusing(t.op, op_);
  assign_reusing(t.command, command);
  t.acked = {};
  t.ok = false;
  t.error.clear();
  pending_ = true;
  t.issued = clock_.now();  // last: nothing but the caller's write after it
  return t.issued;
}

Timestamp OcsDriver::stamp_acked() {
  CallTiming& t = current();
  t.acked = clock_.now();
  t.ok = true;
  pending_ = false;
  record();
  return t.acked;
}

void OcsDriver::record() {
  // The finished record becomes the last one and the other slot the next one: no copy.
  const CallTiming& done = timings_[current_];
  current_ ^= 1;
  has_last_ = true;
  if (collect_) recent_.push_back(done);  // only apply() reports its calls
  if (options_.on_timing) options_.on_timing(done);
}

void OcsDriver::mark_lost() { drop(); }

void OcsDriver::emit_event(const OcsEvent& ev) {
  if (options_.on_event) options_.on_event(ev);
}

std::optional<CallTiming> OcsDriver::last_timing() const {
  if (!has_last_) return std::nullopt;
  return timings_[current_ ^ 1];
}

void OcsDriver::set_op(std::string_view op) { op_ = op; }

// Runs one public operation: serialises it, (re)connects, decorates errors with the switch
// and the command in flight, and drops the connection when its state is no longer known.
template <class F>
auto OcsDriver::call(std::string_view op, F&& fn) -> decltype(fn()) {
  std::lock_guard lock(mutex_);
  recent_.clear();
  pending_ = false;
  auto context = [&] {
    std::string cmd = pending_ ? current().command : "";
    return name() + ": " + std::string(op) + (cmd.empty() ? "" : " (" + cmd + ")") + ": ";
  };
  auto fail_pending = [&](const std::string& err) {
    if (!pending_) return;
    current().acked = now();
    current().ok = false;
    current().error = err;
    pending_ = false;
    record();
  };
  try {
    ensure_open();
    set_op(op);
    return fn();
  } catch (const DenyError& e) {
    std::string msg = context() + e.what();
    fail_pending(e.what());
    throw DenyError(msg, e.code(), e.text());
  } catch (const ConnectionError& e) {
    std::string msg = context() + e.what();
    fail_pending(e.what());
    drop();
    throw ConnectionError(msg);
  } catch (const TimeoutError& e) {
    std::string msg = context() + e.what();
    fail_pending(e.what());
    drop();
    throw TimeoutError(msg);
  } catch (const ProtocolError& e) {
    std::string msg = context() + e.what();
    fail_pending(e.what());
    drop();
    throw ProtocolError(msg);
  } catch (const PortError& e) {
    throw PortError(name() + ": " + e.what());
  } catch (const ApplyError&) {
    throw;
  } catch (const OcsError& e) {
    std::string msg = context() + e.what();
    fail_pending(e.what());
    throw OcsError(msg);
  }
}

void OcsDriver::drop() {
  try {
    do_close();
  } catch (const std::exception& e) {
    spdlog::debug("{}: error while dropping connection: {}", name(), e.what());
  }
  open_ = false;
}

void OcsDriver::ensure_open() {
  if (open_) return;
  clock_.invalidate();
  set_op("open");
  do_open();
  open_ = true;
  set_op("info");
  info_ = do_info();
}

void OcsDriver::open() {
  call("open", [] { return 0; });
}

void OcsDriver::close() {
  std::lock_guard lock(mutex_);
  if (open_) drop();
}

SwitchInfo OcsDriver::info() {
  return call("info", [&] {
    info_ = do_info();
    return *info_;
  });
}

std::vector<Circuit> OcsDriver::list() {
  return call("list", [&] { return do_list(); });
}

void OcsDriver::check_port(Port p, bool modifying) {
  if (info_ && !info_->valid_port(p)) {
    throw PortError(fmt::format("unknown port {} (switch is {}x{}: ingress 1..{}, egress {}..{})", p,
                                info_->ingress_ports, info_->egress_ports, info_->ingress_ports,
                                info_->first_egress(), info_->ingress_ports + info_->egress_ports));
  }
  if (p < 1) throw PortError(fmt::format("unknown port {} (ports are numbered from 1)", p));
  if (modifying && options_.allow && !options_.allow->contains(p)) {
    throw PortError(fmt::format("port {} is outside the allow-list ({}); nothing was sent", p,
                                options_.allow->to_string()));
  }
}

void OcsDriver::check_ports(const std::vector<Port>& ports, bool modifying) {
  for (Port p : ports) check_port(p, modifying);
}

void OcsDriver::check_circuits(const std::vector<Circuit>& circuits) {
  for (const auto& c : circuits) {
    // Port by port, not check_ports({...}): no temporary vector per circuit.
    check_port(c.ingress, true);
    check_port(c.egress, true);
    if (info_ && !info_->is_ingress(c.ingress)) {
      throw PortError(fmt::format("circuit {}: port {} is not an ingress port (ingress 1..{})", to_string(c),
                                  c.ingress, info_->ingress_ports));
    }
    if (info_ && !info_->is_egress(c.egress)) {
      throw PortError(fmt::format("circuit {}: port {} is not an egress port (egress {}..{})", to_string(c),
                                  c.egress, info_->first_egress(), info_->ingress_ports + info_->egress_ports));
    }
  }
  try {
    check_mapping(circuits);
  } catch (const Error& e) {
    throw PortError(e.what());
  }
}

void OcsDriver::connect(const std::vector<Circuit>& circuits) {
  call("connect", [&] {
    check_circuits(circuits);
    if (!circuits.empty()) do_connect(circuits);
    return 0;
  });
}

void OcsDriver::disconnect(const std::vector<Port>& ports) {
  call("disconnect", [&] {
    check_ports(ports, true);
    if (ports.empty()) return 0;
    if (options_.allow) {
      // Deleting a circuit changes both of its ports: the far end must be ours too.
      set_op("list");
      std::set<Port> asked(ports.begin(), ports.end());
      for (const auto& c : do_list()) {
        if (asked.count(c.ingress) || asked.count(c.egress)) check_ports({c.ingress, c.egress}, true);
      }
      set_op("disconnect");
    }
    do_disconnect(ports);
    return 0;
  });
}

std::vector<PortPower> OcsDriver::power(const std::vector<Port>& ports) {
  return call("power", [&] {
    check_ports(ports, false);
    return do_power(ports);
  });
}

void OcsDriver::do_reconfigure(const MappingDiff& diff) {
  if (!diff.remove.empty()) {
    set_op("disconnect");
    std::vector<Port> ports;
    for (const auto& c : diff.remove) ports.push_back(c.ingress);
    do_disconnect(ports);
  }
  if (!diff.add.empty()) {
    set_op("connect");
    do_connect(diff.add);
  }
}

ApplyReport OcsDriver::apply(const std::vector<Circuit>& target, ApplyMode mode, bool dry_run) {
  return call("apply", [&] {
    check_circuits(target);
    collect_ = true;
    struct StopCollecting {
      bool& flag;
      ~StopCollecting() { flag = false; }
    } stop{collect_};
    ApplyReport report;
    set_op("list");
    auto current = do_list();
    report.diff = diff_mapping(current, target, mode, options_.allow.value_or(PortSet{}));
    for (const auto& c : report.diff.remove) check_ports({c.ingress, c.egress}, true);
    if (!dry_run) apply_diff(report);
    report.calls = std::move(recent_);
    recent_.clear();
    if (!report.calls.empty()) {
      report.started = report.calls.front().issued;
      report.finished = report.calls.back().acked;
    }
    return report;
  });
}

ApplyReport OcsDriver::clear() { return apply({}, ApplyMode::kReplace); }

std::vector<std::string> OcsDriver::render_commands(const MappingDiff& diff) const {
  std::vector<std::string> out;
  if (!diff.remove.empty()) {
    PortSet ports;
    for (const auto& c : diff.remove) ports.insert(c.ingress);
    out.push_back("disconnect " + ports.to_string());
  }
  if (!diff.add.empty()) out.push_back("connect " + circuits_text(diff.add));
  return out;
}

void OcsDriver::apply_diff(ApplyReport& report) {
  const MappingDiff& diff = report.diff;
  if (diff.empty()) return;
  try {
    set_op("reconfigure");
    do_reconfigure(diff);
  } catch (const ApplyError&) {
    throw;
  } catch (const OcsError& e) {
    // Find out exactly what took effect before the failure; reconnect if needed.
    std::string cmd = pending_ ? current().command : "";
    std::string err = e.what();
    if (pending_) {
      current().acked = now();
      current().error = err;
      pending_ = false;
      record();
    }
    bool connection_lost = dynamic_cast<const ConnectionError*>(&e) || dynamic_cast<const TimeoutError*>(&e) ||
                           dynamic_cast<const ProtocolError*>(&e);
    std::vector<Circuit> made, not_made, removed;
    bool known = false;
    try {
      if (connection_lost) {
        drop();
        ensure_open();
      }
      set_op("list");
      auto now_circuits = do_list();
      std::set<Circuit> have(now_circuits.begin(), now_circuits.end());
      for (const auto& c : diff.add) (have.count(c) ? made : not_made).push_back(c);
      for (const auto& c : diff.remove) {
        if (!have.count(c)) removed.push_back(c);
      }
      known = true;
    } catch (const std::exception& e2) {
      spdlog::warn("{}: cannot read circuits back after a failed reconfiguration: {}", name(), e2.what());
      if (open_) drop();
    }
    std::string msg = name() + ": reconfiguration failed" + (cmd.empty() ? "" : " at (" + cmd + ")") + ": " + err;
    if (known) {
      msg += fmt::format("; made {} of {} circuits: {}; not made: {}; removed {} of {}: {}", made.size(),
                         diff.add.size(), circuits_text(made), circuits_text(not_made), removed.size(),
                         diff.remove.size(), circuits_text(removed));
    } else {
      msg += "; the switch state could not be read back (run 'ocsctl list')";
    }
    throw ApplyError(msg, made, not_made, removed, known);
  }
}

}  // namespace ocslab::ocs
