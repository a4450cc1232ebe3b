#include "ocslab/emulator/scpi_session.h"

#include <fmt/format.h>

#include <set>

#include "ocslab/ocsctl/errors.h"

namespace ocslab::emu {

ScpiSession::ScpiSession(SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config, SendFn send,
                         CloseFn close)
    : ProtocolSession(model, truth, config, std::move(send), std::move(close), "scpi") {}

void ScpiSession::closed() {
  ProtocolSession::closed();
  lines_.clear();
  waiting_.reset();
}

void ScpiSession::on_bytes(std::string_view bytes) {
  if (is_closed()) return;
  for (char ch : bytes) {
    if (ch == '\n') {
      if (!discarding_) {
        if (!buf_.empty() && buf_.back() == '\r') buf_.pop_back();
        lines_.push_back(std::move(buf_));
      }
      buf_.clear();
      discarding_ = false;
      continue;
    }
    if (discarding_) continue;
    buf_ += ch;
    if (buf_.size() > kMaxLine) {
      // IEEE 488.2: the input buffer overflowed; the rest of this line is lost.
      buf_.clear();
      discarding_ = true;
      record_command("INVALID");
      push_error(-363, "Input buffer overrun");
      record_ack("INVALID", false);
    }
  }
  if (lines_.size() > kMaxQueued) {
    lines_.clear();
    request_close();
    return;
  }
  pump();
}

void ScpiSession::pump() {
  while (!busy_ && !is_closed()) {
    if (!line_) {
      if (lines_.empty()) return;
      std::string text = std::move(lines_.front());
      lines_.pop_front();
      start_line(text);
      continue;
    }
    if (line_->next >= line_->commands.size()) {
      finish_line();
      continue;
    }
    const ocs::ScpiCommand& c = line_->commands[line_->next++];
    if (!run(c)) busy_ = true;
  }
}

void ScpiSession::start_line(const std::string& text) {
  std::vector<ocs::ScpiCommand> cmds;
  try {
    cmds = ocs::parse_scpi_command_line(text);
  } catch (const ocs::ProtocolError&) {
    record_command("INVALID");
    push_error(-102, "Syntax error");
    record_ack("INVALID", false);
    return;
  }
  line_ = Line{std::move(cmds), 0, {}};
}

void ScpiSession::finish_line() {
  // Several queries on one line answer in one response message, separated by ';'.
  std::string msg;
  for (const auto& r : line_->replies) msg += (msg.empty() ? "" : ";") + r;
  line_.reset();
  if (!msg.empty()) send(msg + "\r\n");
}

std::string ScpiSession::subject_of(const ocs::ScpiCommand& c) {
  std::string s;
  for (const auto& h : c.header) s += (s.empty() || h.starts_with('*') ? "" : ":") + h;
  if (s.size() > 64) s = s.substr(0, 64);
  return s + (c.query ? "?" : "");
}

bool ScpiSession::run(const ocs::ScpiCommand& c) {
  const std::string subject = subject_of(c);
  record_command(subject);
  uint64_t before = errors_pushed_;
  bool later = false, ok = true;
  auto reply = execute(c, later, ok);
  if (later) return false;
  if (reply) line_->replies.push_back(*reply);
  record_ack(subject, ok && errors_pushed_ == before);
  return true;
}

void ScpiSession::push_error(int code, const std::string& message) {
  ++errors_pushed_;
  errors_.push(code, message);
}

void ScpiSession::model_error(const ModelError& e) {
  switch (e.kind) {
    case ModelError::Kind::kInvalidPort: push_error(-222, "Data out of range; " + e.text); break;
    case ModelError::Kind::kBadRequest: push_error(-221, "Settings conflict; " + e.text); break;
    case ModelError::Kind::kPortInUse: push_error(-200, "Execution error; " + e.text); break;
  }
}

std::optional<std::vector<ocs::Circuit>> ScpiSession::circuits_arg(const ocs::ScpiCommand& c) {
  if (c.channel_lists.size() != 2 || c.args.size() != 2) {
    push_error(-109, "Missing parameter; expected (@ingress),(@egress)");
    return std::nullopt;
  }
  const auto& ins = c.channel_lists[0];
  const auto& outs = c.channel_lists[1];
  if (ins.size() != outs.size()) {
    push_error(-220, "Parameter error; channel lists differ in length");
    return std::nullopt;
  }
  std::vector<ocs::Circuit> out;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!model_.is_ingress(ins[i])) {
      push_error(-222, fmt::format("Data out of range; Invalid OXC port: {}", ins[i]));
      return std::nullopt;
    }
    if (!model_.is_egress(outs[i])) {
      push_error(-222, fmt::format("Data out of range; Invalid OXC port: {}", outs[i]));
      return std::nullopt;
    }
    out.push_back({ins[i], outs[i]});
  }
  return out;
}

// Makes the circuits. The command is done once accepted (overlapped, IEEE 488.2): the mirrors
// move on while the session runs the next command; *OPC? and *WAI wait for them.
bool ScpiSession::connect(std::vector<ocs::Circuit> circuits) {
  std::weak_ptr<bool> alive = this->alive();
  // Posted by the model when the last mirror of this command settles (or its move is
  // superseded), never from inside connect(), so the count below is already taken.
  auto done = [this, alive] {
    if (alive.expired()) return;
    if (--pending_moves_ == 0) operation_complete();
  };
  if (auto e = model_.connect(circuits, done)) {
    model_error(*e);
    return false;
  }
  ++pending_moves_;
  return true;
}

void ScpiSession::operation_complete() {
  if (!waiting_ || is_closed() || !line_) return;
  OpcWait w = std::move(*waiting_);
  waiting_.reset();
  if (w.query) line_->replies.push_back("1");
  record_ack(w.subject, true);
  busy_ = false;
  pump();
}

std::optional<std::string> ScpiSession::execute(const ocs::ScpiCommand& c, bool& later, bool& ok) {
  if (c.common()) return common(c, later, ok);
  if (c.is("SYSTem:ERRor[:NEXT]") && c.query) {
    return errors_.pop_reply();
  }
  const auto& p = model_.params();
  if (c.is("OXC:SWITch:SIZE") && c.query) return fmt::format("{},{}", p.ingress_ports, p.egress_ports);
  if (c.is("OXC:SWITch:CONNect:STATe") && c.query) return ocs::format_scpi_connections(model_.circuits());
  if (c.is("OXC:SWITch:CONNect:PORT") && c.query) return port_query(c);
  if (c.is("PMON:POWer") && c.query) return power_query(c);
  if (c.is("OXC:SWITch:CONNect:ADD") && !c.query) {
    if (auto cs = circuits_arg(c)) connect(std::move(*cs));
    return std::nullopt;
  }
  if (c.is("OXC:SWITch:CONNect:ONLY") && !c.query) {
    auto cs = circuits_arg(c);
    if (!cs) return std::nullopt;
    std::set<Port> ins, outs;
    for (const auto& x : *cs) {
      if (!ins.insert(x.ingress).second || !outs.insert(x.egress).second) {
        push_error(-221, fmt::format("Settings conflict; Port used twice in request: {}", ocs::to_string(x)));
        return std::nullopt;
      }
    }
    // Validated above, so clearing first cannot leave the switch half-configured.
    if (auto e = model_.disconnect({})) {
      model_error(*e);
      return std::nullopt;
    }
    connect(std::move(*cs));
    return std::nullopt;
  }
  if (c.is("OXC:SWITch:CONNect:SUB") && !c.query) {
    auto cs = circuits_arg(c);
    if (!cs) return std::nullopt;
    auto now = model_.circuits();
    std::set<ocs::Circuit> have(now.begin(), now.end());
    std::vector<Port> ins;
    for (const auto& x : *cs) {
      // All or nothing, like ADD: a pair that is not connected refuses the whole command.
      if (!have.count(x)) {
        push_error(-200, fmt::format("Execution error; not connected: {}", ocs::to_string(x)));
        return std::nullopt;
      }
      ins.push_back(x.ingress);
    }
    if (auto e = model_.disconnect(ins)) model_error(*e);
    return std::nullopt;
  }
  if (c.is("OXC:SWITch:DISConnect:ALL") && !c.query) {
    if (auto e = model_.disconnect({})) model_error(*e);
    return std::nullopt;
  }
  ok = false;
  push_error(-113, "Undefined header");
  return std::nullopt;
}

std::optional<std::string> ScpiSession::common(const ocs::ScpiCommand& c, bool& later, bool& ok) {
  const std::string& h = c.header[0];
  const auto& p = model_.params();
  if (h == "*IDN" && c.query) return fmt::format("{},{},{},{}", p.vendor, p.model, p.serial, p.version);
  // Operation complete: once this session's mirrors have settled. Without ack_after_settle the
  // switch reports completion at once, as it does over TL1 and NETCONF (the light may follow).
  if ((h == "*OPC" && c.query) || (h == "*WAI" && !c.query)) {
    if (!p.ack_after_settle || pending_moves_ == 0) return c.query ? std::optional<std::string>("1") : std::nullopt;
    waiting_ = OpcWait{subject_of(c), c.query};
    later = true;
    return std::nullopt;
  }
  if (h == "*CLS" && !c.query) {
    errors_.clear();
    return std::nullopt;
  }
  if (h == "*OPC" && !c.query) return std::nullopt;  // no event status register is modelled
  ok = false;
  push_error(-113, "Undefined header");
  return std::nullopt;
}

std::optional<std::string> ScpiSession::port_query(const ocs::ScpiCommand& c) {
  Port p = 0;
  if (c.channel_lists.size() == 1 && c.channel_lists[0].size() == 1) {
    p = c.channel_lists[0][0];
  } else if (c.args.size() == 1) {
    try {
      size_t used = 0;
      p = std::stoi(c.args[0], &used);
      if (used != c.args[0].size()) throw std::invalid_argument(c.args[0]);
    } catch (const std::exception&) {
      push_error(-104, "Data type error");
      return std::nullopt;
    }
  } else {
    push_error(-109, "Missing parameter");
    return std::nullopt;
  }
  if (!model_.valid(p)) {
    push_error(-222, fmt::format("Data out of range; Invalid OXC port: {}", p));
    return std::nullopt;
  }
  for (const auto& x : model_.circuits()) {
    if (x.ingress == p) return "\"" + std::to_string(x.egress) + "\"";
    if (x.egress == p) return "\"" + std::to_string(x.ingress) + "\"";
  }
  return "\"0\"";
}

std::optional<std::string> ScpiSession::power_query(const ocs::ScpiCommand& c) {
  if (c.channel_lists.size() != 1 || c.args.size() != 1) {
    push_error(-109, "Missing parameter; expected (@ports)");
    return std::nullopt;
  }
  for (Port p : c.channel_lists[0]) {
    if (!model_.valid(p)) {
      push_error(-222, fmt::format("Data out of range; Invalid OXC port: {}", p));
      return std::nullopt;
    }
  }
  std::string out = "(";
  for (Port p : c.channel_lists[0]) out += fmt::format("{}{:.2f}", out.size() > 1 ? "," : "", model_.power_dbm(p));
  return out + ")";
}

}  // namespace ocslab::emu
