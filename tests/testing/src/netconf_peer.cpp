// NETCONF grammar peer: hello exchange, get / get-config / edit-config / close-session on
// the Polatis optical-switch model, standard rpc-error replies, and the PeerQuirks faults.
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <variant>

#include "ocslab/ocsctl/netconf_codec.h"
#include "ocslab/testing/peers.h"

namespace ocslab::testing {

namespace {

using namespace ocslab::ocs;

// Thrown inside a handler; becomes an <rpc-error> reply.
struct PeerRpcError {
  RpcError error;
};

[[noreturn]] void rpc_fail(std::string tag, std::string message, std::string type = "application") {
  RpcError e;
  e.type = std::move(type);
  e.tag = std::move(tag);
  e.message = std::move(message);
  throw PeerRpcError{e};
}

bool contains(const std::string& text, const std::string& needle) {
  return !needle.empty() && text.find(needle) != std::string::npos;
}

class NetconfSession {
 public:
  NetconfSession(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& q)
      : in_(in_fd), out_(out_fd), sw_(sw), q_(q), list_name_(pair_list_name(q.netconf_revision)) {}

  void run() {
    static std::atomic<int> sessions{0};
    std::vector<std::string> caps{kNetconfBase10};
    if (q_.netconf_base11) caps.push_back(kNetconfBase11);
    caps.push_back(fmt::format("{}?module=optical-switch&revision={}", kOpticalSwitchNs, q_.netconf_revision));
    if (!send(build_hello(caps, std::to_string(::getpid() % 100000 * 100 + ++sessions)))) return;

    auto client = read_message();
    if (!client) return;
    try {
      Hello h = parse_hello(parse_netconf_message(*client));
      if (q_.netconf_base11 && h.base11) {
        decoder_.set_framing(Framing::kChunked);
        framing_ = Framing::kChunked;
      }
    } catch (const Error&) {
      return;  // RFC 6242: a peer without a valid hello is disconnected
    }
    for (;;) {
      std::optional<std::string> raw;
      try {
        raw = read_message();
      } catch (const ProtocolError&) {
        return;  // framing broken: nothing more can be understood on this session
      }
      if (!raw || !handle(*raw)) return;
    }
  }

 private:
  std::optional<std::string> read_message() {
    for (;;) {
      if (auto m = decoder_.next()) return m;
      char buf[8192];
      ssize_t n = ::read(in_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      decoder_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

  // A reply, preceded by a <notification> when the autonomous quirk is on.
  bool reply(const std::string& xml) {
    if (q_.autonomous) {
      std::string note = fmt::format(
          "<notification xmlns=\"urn:ietf:params:xml:ns:netconf:notification:1.0\"><eventTime>2024-01-01T00:00:00Z"
          "</eventTime><port-status-change xmlns=\"{}\"><port-id>1</port-id><status>ENABLED</status>"
          "</port-status-change></notification>",
          kPolatisSwitchNs);
      if (!send(note)) return false;
    }
    return send(xml);
  }

  bool send(const std::string& xml) {
    if (q_.reply_delay_ms > 0)
      // load-safe: the reply_delay_ms quirk: a slow switch, a lower bound that load only lengthens.
      std::this_thread::sleep_for(std::chrono::milliseconds(q_.reply_delay_ms));  // kept: the reply_delay_ms quirk
    if (!q_.split_writes) return write_all(out_, encode_frame(xml, framing_));
    // Several small chunks, written a few bytes at a time: exercises client reassembly.
    std::string framed = encode_frame(xml, framing_, 97);
    size_t step = std::max<size_t>(7, framed.size() / 64);
    for (size_t off = 0; off < framed.size(); off += step) {
      if (!write_all(out_, framed.substr(off, step))) return false;
      // load-safe: the split_writes quirk paces its pieces.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // kept: the split_writes quirk paces its pieces
    }
    return true;
  }

  // Returns false when the session must end.
  bool handle(const std::string& raw) {
    NetconfMessage msg;
    try {
      msg = parse_netconf_message(raw);
    } catch (const ProtocolError& e) {
      sw_.record(raw);
      return reply(build_error_reply("", {"rpc", "malformed-message", "error", e.what()}));
    }
    std::string text = xml_text(msg.root);
    sw_.record(text);
    if (contains(text, q_.drop_on)) return false;
    if (contains(text, q_.never_reply_to)) return true;
    if (contains(text, q_.garbage_on)) {
      // Breaks either framing: a bad chunk header, or non-XML before the EOM marker.
      return write_all(out_,
                       framing_ == Framing::kChunked ? "\n#x1\n\x01\x02garbage\n##\n" : "\x01\x02<<garbage]]>]]>");
    }
    RpcRequest req;
    try {
      req = parse_rpc(msg);
    } catch (const ProtocolError& e) {
      std::string id = msg.root.attribute("message-id").value();
      return reply(build_error_reply(id, {"rpc", "malformed-message", "error", e.what()}));
    }
    if (contains(text, q_.deny_on)) {
      return reply(build_error_reply(req.message_id, {"application", "operation-failed", "error",
                                                      "Command refused by switch policy (" + q_.deny_on + ")"}));
    }
    try {
      if (req.operation == "get" || req.operation == "get-config") {
        return reply(build_data_reply(req.message_id, get(req.op, req.operation == "get")));
      }
      if (req.operation == "edit-config") {
        edit_config(req.op);
        return reply(build_ok_reply(req.message_id));
      }
      if (req.operation == "close-session") {
        reply(build_ok_reply(req.message_id));
        return false;
      }
      rpc_fail("operation-not-supported", "Operation '" + req.operation + "' is not supported", "protocol");
    } catch (const PeerRpcError& e) {
      return reply(build_error_reply(req.message_id, e.error));
    }
  }

  Port port_value(pugi::xml_node parent, std::string_view leaf) {
    auto t = child_text(parent, leaf);
    if (!t) rpc_fail("missing-element", "Missing element '" + std::string(leaf) + "'", "protocol");
    try {
      return parse_port_number(*t, leaf);
    } catch (const ProtocolError&) {
      rpc_fail("invalid-value", "Invalid port: " + *t);
    }
  }

  std::string get(pugi::xml_node op, bool with_state) {
    std::vector<std::string> wanted;
    std::map<std::string, pugi::xml_node> selectors;
    auto filter = child_local(op, "filter");
    if (filter) {
      for (auto c : filter.children()) {
        if (c.type() != pugi::node_element) continue;
        wanted.emplace_back(local_name(c.name()));
        selectors[wanted.back()] = c;
      }
    } else {
      wanted = {"cross-connects", "port-config", "product-information"};
    }
    std::string out;
    for (const auto& w : wanted) {
      if (w == "cross-connects") {
        out += fmt::format("<cross-connects xmlns=\"{}\">", kOpticalSwitchNs);
        for (const auto& c : sw_.circuits()) {
          out += fmt::format("<{0}><ingress>{1}</ingress><egress>{2}</egress></{0}>", list_name_, c.ingress, c.egress);
        }
        out += "</cross-connects>";
      } else if (w == "port-config") {
        out += fmt::format("<port-config xmlns=\"{}\">", kOpticalSwitchNs);
        for (int p = 1; p <= sw_.ingress_ports() + sw_.egress_ports(); ++p) {
          out += fmt::format("<port><port-id>{}</port-id><label></label><status>ENABLED</status></port>", p);
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
          for (int p = 1; p <= sw_.ingress_ports() + sw_.egress_ports(); ++p) ports.push_back(p);
        }
        for (Port p : ports) {
          if (!sw_.valid(p)) rpc_fail("invalid-value", "Invalid port: " + std::to_string(p));
        }
        out += fmt::format("<opm-power xmlns=\"{}\">", kOpticalSwitchNs);
        for (Port p : ports) {
          out += fmt::format("<port><port-id>{}</port-id><power>{:.2f}</power></port>", p, sw_.power_dbm(p));
        }
        out += "</opm-power>";
      } else if (w == "product-information" && with_state) {
        out += fmt::format(
            "<product-information xmlns=\"{}\"><manufacturer>Polatis</manufacturer>"
            "<model-name>OCS-TESTPEER-{}x{}-HU1</model-name><serial-number>TP{:04d}</serial-number>"
            "<software-version>8.1.2-testpeer</software-version></product-information>",
            kOpticalSwitchNs, sw_.ingress_ports(), sw_.egress_ports(), sw_.ingress_ports() + sw_.egress_ports());
      }
      // Anything else selects nothing (subtree filtering of unknown nodes).
    }
    return out;
  }

  void edit_config(pugi::xml_node op) {
    // The meaning of the edit is the protocol's, shared with the emulator; the peer keeps
    // its own wording and applies the result to its PeerSwitch.
    CrossConnectEditRules rules;
    rules.list_name = list_name_;
    rules.revision = q_.netconf_revision;
    rules.replace_patched = q_.replace_patched;
    rules.is_ingress = [this](Port p) { return sw_.is_ingress(p); };
    rules.is_egress = [this](Port p) { return sw_.is_egress(p); };
    rules.port_noun = "port";
    rules.echo_limit = std::string::npos;
    rules.name_pair_used_twice = false;
    auto evaluated = evaluate_cross_connect_edit(sw_.circuits(), op, rules);
    if (auto* e = std::get_if<RpcError>(&evaluated)) throw PeerRpcError{*e};
    const auto& [drop, add] = std::get<CrossConnectEdit>(evaluated);
    std::string err;
    if (!drop.empty()) err = sw_.disconnect(drop);
    if (err.empty() && !add.empty()) err = sw_.connect(add, true);
    if (!err.empty()) rpc_fail("operation-failed", err);
  }

  int in_, out_;
  PeerSwitch& sw_;
  const PeerQuirks& q_;
  std::string list_name_;
  FrameDecoder decoder_;
  Framing framing_ = Framing::kEndOfMessage;
};

}  // namespace

void serve_netconf_session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& quirks) {
  NetconfSession(in_fd, out_fd, sw, quirks).run();
}

}  // namespace ocslab::testing
