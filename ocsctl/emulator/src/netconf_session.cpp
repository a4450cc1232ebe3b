#include "ocslab/emulator/netconf_session.h"

#include <fmt/format.h>

#include <map>
#include <variant>

namespace ocslab::emu {

using namespace ocslab::ocs;

namespace {

// Thrown inside a handler; becomes an <rpc-error> reply.
struct RpcFail {
  RpcError error;
};

[[noreturn]] void rpc_fail(std::string tag, std::string message, std::string type = "application") {
  RpcError e;
  e.type = std::move(type);
  e.tag = std::move(tag);
  e.message = std::move(message);
  throw RpcFail{e};
}

std::atomic<int> g_session_ids{0};

}  // namespace

NetconfSession::NetconfSession(SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config, SendFn send,
                               CloseFn close)
    : ProtocolSession(model, truth, config, std::move(send), std::move(close), "netconf"),
      list_name_(pair_list_name(config.netconf_revision)),
      session_id_(std::to_string(++g_session_ids)) {}

void NetconfSession::on_open() {
  std::vector<std::string> caps{kNetconfBase10, kNetconfBase11,
                                fmt::format("{}?module=optical-switch&revision={}", kOpticalSwitchNs,
                                            config_.netconf_revision)};
  send(encode_frame(build_hello(caps, session_id_), Framing::kEndOfMessage));
}

void NetconfSession::on_bytes(std::string_view bytes) {
  if (is_closed()) return;
  decoder_.feed(bytes);
  if (decoder_.pending() > kMaxPending) {
    request_close();
    return;
  }
  pump();
}

void NetconfSession::pump() {
  while (!busy_ && !is_closed()) {
    std::optional<std::string> raw;
    try {
      raw = decoder_.next();
    } catch (const ProtocolError& e) {
      // Framing broken: nothing after this can be delimited, so answer once and hang up.
      record_command("malformed");
      fail_and_close("", "malformed-message", e.what());
      return;
    }
    if (!raw) return;
    // The decoder hands out one message at a time, so the framing switch after the hello
    // applies exactly from the next message on.
    if (!hello_done_) {
      handle_hello(*raw);
      continue;
    }
    if (!handle(*raw)) busy_ = true;
  }
}

void NetconfSession::handle_hello(const std::string& raw) {
  record_command("hello");
  try {
    Hello h = parse_hello(parse_netconf_message(raw));
    hello_done_ = true;
    if (h.base11) {
      decoder_.set_framing(Framing::kChunked);
      framing_ = Framing::kChunked;
    }
    record_ack("hello", true);
  } catch (const Error&) {
    // RFC 6241 §8.1: a peer without a valid hello is disconnected.
    record_ack("hello", false);
    request_close();
  }
}

// Callers record the ack in the ground truth first: once the reply is out, a client may read
// the ground truth before this thread gets to record it.
void NetconfSession::reply(const std::string& xml) { send(encode_frame(xml, framing_)); }

void NetconfSession::fail_and_close(const std::string& message_id, const std::string& tag, const std::string& text) {
  record_ack("malformed", false);
  reply(build_error_reply(message_id, {"rpc", tag, "error", text}));
  request_close();
}

bool NetconfSession::handle(const std::string& raw) {
  NetconfMessage msg;
  try {
    msg = parse_netconf_message(raw);
  } catch (const ProtocolError& e) {
    record_command("malformed");
    record_ack("malformed", false);
    reply(build_error_reply("", {"rpc", "malformed-message", "error", e.what()}));
    return true;
  }
  RpcRequest req;
  try {
    req = parse_rpc(msg);
  } catch (const ProtocolError& e) {
    record_command("malformed");
    std::string id = msg.root.attribute("message-id").value();
    record_ack("malformed", false);
    reply(build_error_reply(id, {"rpc", "malformed-message", "error", e.what()}));
    return true;
  }
  std::string op = req.operation.size() > 64 ? req.operation.substr(0, 64) : req.operation;
  record_command(op);
  try {
    if (op == "get" || op == "get-config") {
      std::string data = build_data_reply(req.message_id, get(req.op, op == "get"));
      record_ack(op, true);
      reply(data);
      return true;
    }
    if (op == "edit-config") return edit_config(req.op, req.message_id);
    if (op == "close-session") {
      record_ack(op, true);
      reply(build_ok_reply(req.message_id));
      request_close();
      return true;
    }
    rpc_fail("operation-not-supported", "Operation '" + op + "' is not supported", "protocol");
  } catch (const RpcFail& e) {
    record_ack(op, false);
    reply(build_error_reply(req.message_id, e.error));
  }
  return true;
}

namespace {

Port port_value(pugi::xml_node parent, std::string_view leaf) {
  auto t = child_text(parent, leaf);
  if (!t) rpc_fail("missing-element", "Missing element '" + std::string(leaf) + "'", "protocol");
  try {
    return parse_port_number(*t, leaf);
  } catch (const ProtocolError&) {
    rpc_fail("invalid-value", "Invalid OXC port: " + t->substr(0, 64));
  }
}

}  // namespace

std::string NetconfSession::get(pugi::xml_node op, bool with_state) {
  std::vector<std::string> wanted;
  std::map<std::string, pugi::xml_node> selectors;
  if (auto filter = child_local(op, "filter")) {
    for (auto c : filter.children()) {
      if (c.type() != pugi::node_element) continue;
      wanted.emplace_back(local_name(c.name()));
      selectors[wanted.back()] = c;
    }
  } else {
    wanted = {"cross-connects", "port-config", "product-information", "opm-power"};
  }
  const auto& p = model_.params();
  std::string out;
  for (const auto& w : wanted) {
    if (w == "cross-connects") {
      out += fmt::format("<cross-connects xmlns=\"{}\">", kOpticalSwitchNs);
      for (const auto& c : model_.circuits()) {
        out += fmt::format("<{0}><ingress>{1}</ingress><egress>{2}</egress></{0}>", list_name_, c.ingress, c.egress);
      }
      out += "</cross-connects>";
    } else if (w == "port-config") {
      out += fmt::format("<port-config xmlns=\"{}\">", kOpticalSwitchNs);
      for (Port x = 1; x <= model_.total_ports(); ++x) {
        out += fmt::format("<port><port-id>{}</port-id><label></label><status>{}</status></port>", x,
                           model_.shutter_closed(x) ? "DISABLED" : "ENABLED");
      }
      out += "</port-config>";
    } else if (w == "opm-power" && with_state) {
      std::vector<Port> ports;
      if (auto sel = selectors[w]) {
        for (auto port : children_local(sel, "port")) {
          if (child_local(port, "port-id")) ports.push_back(port_value(port, "port-id"));
        }
      }
      if (ports.empty()) {
        for (Port x = 1; x <= model_.total_ports(); ++x) ports.push_back(x);
      }
      for (Port x : ports) {
        if (!model_.valid(x)) rpc_fail("invalid-value", fmt::format("Invalid OXC port: {}", x));
      }
      out += fmt::format("<opm-power xmlns=\"{}\">", kOpticalSwitchNs);
      for (Port x : ports) {
        out += fmt::format("<port><port-id>{}</port-id><power>{:.2f}</power></port>", x, model_.power_dbm(x));
      }
      out += "</opm-power>";
    } else if (w == "product-information" && with_state) {
      // The model has no size leaf; clients read N x M from the model name, as on Polatis.
      out += fmt::format(
          "<product-information xmlns=\"{}\"><manufacturer>{}</manufacturer><model-name>{}-{}x{}</model-name>"
          "<serial-number>{}</serial-number><software-version>{}</software-version></product-information>",
          kOpticalSwitchNs, xml_escape(p.vendor), xml_escape(p.model), p.ingress_ports, p.egress_ports,
          xml_escape(p.serial), xml_escape(p.version));
    }
    // Anything else selects nothing (subtree filtering of unknown nodes).
  }
  return out;
}

bool NetconfSession::edit_config(pugi::xml_node op, const std::string& message_id) {
  CrossConnectEditRules rules;
  rules.list_name = list_name_;
  rules.revision = config_.netconf_revision;
  rules.replace_patched = model_.params().replace_patched;
  rules.is_ingress = [this](Port p) { return model_.is_ingress(p); };
  rules.is_egress = [this](Port p) { return model_.is_egress(p); };
  auto evaluated = evaluate_cross_connect_edit(model_.circuits(), op, rules);
  if (auto* e = std::get_if<RpcError>(&evaluated)) throw RpcFail{*e};
  // Everything was validated by the evaluation, so applying the difference is all-or-nothing.
  auto& [drop, add] = std::get<CrossConnectEdit>(evaluated);
  if (!drop.empty()) {
    if (auto e = model_.disconnect(drop)) rpc_fail("operation-failed", e->text);
  }
  if (add.empty()) {
    record_ack("edit-config", true);
    reply(build_ok_reply(message_id));
    return true;
  }
  const bool wait = model_.params().ack_after_settle;
  std::weak_ptr<bool> alive = this->alive();
  auto done = [this, alive, message_id, wait] {
    if (!wait || alive.expired()) return;
    busy_ = false;
    if (!is_closed()) {
      record_ack("edit-config", true);
      reply(build_ok_reply(message_id));
    }
    pump();
  };
  if (auto e = model_.connect(add, done)) {
    rpc_fail(e->kind == ModelError::Kind::kPortInUse ? "in-use" : "invalid-value", e->text);
  }
  if (wait) return false;
  record_ack("edit-config", true);
  reply(build_ok_reply(message_id));
  return true;
}

}  // namespace ocslab::emu
