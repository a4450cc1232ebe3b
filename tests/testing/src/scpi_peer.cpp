// SCPI grammar peer (docs/protocols.md#scpi): one session of the Polatis :OXC command set with an
// IEEE 488.2-style error queue. Set commands print nothing; errors are only visible through
// :SYST:ERR?, and a query that fails prints nothing either, as on real instruments.
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <chrono>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "ocslab/ocsctl/scpi_codec.h"
#include "ocslab/testing/peers.h"

namespace ocslab::testing {

namespace {

using ocs::Circuit;
using ocs::Port;
using ocs::ScpiCommand;

constexpr size_t kQueueDepth = 16;

bool has_text(const std::string& text, const std::string& needle) {
  return !needle.empty() && text.find(needle) != std::string::npos;
}

class ScpiSession {
 public:
  ScpiSession(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& q) : in_(in_fd), out_(out_fd), sw_(sw), q_(q) {}

  void run() {
    std::string buf;
    char chunk[4096];
    for (;;) {
      ssize_t n = ::read(in_, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      buf.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!handle_line(line)) return;
      }
    }
  }

 private:
  void push_error(int code, const std::string& msg) { errors_.push(code, msg); }

  // Returns false when the session must end (drop_on).
  bool handle_line(const std::string& line) {
    std::vector<ScpiCommand> cmds;
    try {
      cmds = ocs::parse_scpi_command_line(line);
    } catch (const ocs::ProtocolError&) {
      sw_.record(line);
      push_error(-102, "Syntax error");
      return true;
    }
    std::vector<std::string> replies;
    for (const auto& c : cmds) {
      sw_.record(c.text);
      if (muted_) continue;
      if (has_text(c.text, q_.drop_on)) return false;
      if (has_text(c.text, q_.never_reply_to)) {
        // A set command prints nothing anyway; the hang must also swallow the :SYST:ERR?
        // that follows it, so the peer stays silent for the rest of the session.
        muted_ = true;
        continue;
      }
      if (has_text(c.text, q_.garbage_on)) {
        replies.push_back("\x01\x7fgarbage#&!\x02");
        continue;
      }
      if (has_text(c.text, q_.deny_on)) {
        push_error(-200, "Execution error; command refused by the switch");
        continue;
      }
      if (auto r = execute(c)) replies.push_back(*r);
    }
    if (muted_ || replies.empty()) return true;
    // Several queries on one line answer in one response message, separated by ';'.
    std::string msg;
    for (const auto& r : replies) msg += (msg.empty() ? "" : ";") + r;
    send(msg + (q_.bare_lf ? "\n" : "\r\n"));
    return true;
  }

  void send(const std::string& data) {
    if (q_.reply_delay_ms > 0)
      // load-safe: the reply_delay_ms quirk: a slow switch, a lower bound that load only lengthens.
      std::this_thread::sleep_for(std::chrono::milliseconds(q_.reply_delay_ms));  // kept: the reply_delay_ms quirk
    if (!q_.split_writes) {
      write_all(out_, data);
      return;
    }
    for (size_t i = 0; i < data.size(); i += 3) {
      if (!write_all(out_, data.substr(i, 3))) return;
      // load-safe: the split_writes quirk paces its pieces.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // kept: the split_writes quirk paces its pieces
    }
  }

  bool check_ports(const std::vector<Port>& ports) {
    for (Port p : ports) {
      if (!sw_.valid(p)) {
        push_error(-222, fmt::format("Data out of range; invalid port {}", p));
        return false;
      }
    }
    return true;
  }

  // Two channel lists paired in order; queues the error and returns nothing when invalid.
  std::optional<std::vector<Circuit>> circuits_arg(const ScpiCommand& c) {
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
    std::vector<Circuit> out;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!sw_.is_ingress(ins[i])) {
        push_error(-222, fmt::format("Data out of range; not an ingress port {}", ins[i]));
        return std::nullopt;
      }
      if (!sw_.is_egress(outs[i])) {
        push_error(-222, fmt::format("Data out of range; not an egress port {}", outs[i]));
        return std::nullopt;
      }
      out.push_back({ins[i], outs[i]});
    }
    return out;
  }

  void switch_result(const std::string& err) {
    if (err.empty()) return;
    if (err.starts_with("Invalid OXC port"))
      push_error(-222, "Data out of range; " + err);
    else if (err.starts_with("Port used twice"))
      push_error(-221, "Settings conflict; " + err);
    else
      push_error(-200, "Execution error; " + err);
  }

  std::optional<std::string> execute(const ScpiCommand& c) {
    if (c.common()) return common(c);
    if (c.is("SYSTem:ERRor[:NEXT]") && c.query) {
      return errors_.pop_reply();
    }
    if (c.is("OXC:SWITch:SIZE") && c.query) return fmt::format("{},{}", sw_.ingress_ports(), sw_.egress_ports());
    if (c.is("OXC:SWITch:CONNect:STATe") && c.query) return ocs::format_scpi_connections(sw_.circuits());
    if (c.is("OXC:SWITch:CONNect:PORT") && c.query) return port_query(c);
    if (c.is("PMON:POWer") && c.query) return power_query(c);
    if (c.is("OXC:SWITch:CONNect:ADD") && !c.query) {
      if (auto cs = circuits_arg(c)) switch_result(sw_.connect(*cs, q_.replace_patched));
      return std::nullopt;
    }
    if (c.is("OXC:SWITch:CONNect:ONLY") && !c.query) {
      if (auto cs = circuits_arg(c)) {
        std::set<Port> ins, outs;
        for (const auto& x : *cs) {
          if (!ins.insert(x.ingress).second || !outs.insert(x.egress).second) {
            push_error(-221, "Settings conflict; port used twice in request");
            return std::nullopt;
          }
        }
        switch_result(sw_.disconnect({}));
        switch_result(sw_.connect(*cs, true));
      }
      return std::nullopt;
    }
    if (c.is("OXC:SWITch:CONNect:SUB") && !c.query) {
      auto cs = circuits_arg(c);
      if (!cs) return std::nullopt;
      auto now = sw_.circuits();
      std::set<Circuit> have(now.begin(), now.end());
      std::vector<Port> ins;
      for (const auto& x : *cs) {
        // All or nothing, like ADD: a pair that is not connected refuses the whole command.
        if (!have.count(x)) {
          push_error(-200, fmt::format("Execution error; not connected: {}", ocs::to_string(x)));
          return std::nullopt;
        }
        ins.push_back(x.ingress);
      }
      switch_result(sw_.disconnect(ins));
      return std::nullopt;
    }
    if (c.is("OXC:SWITch:DISConnect:ALL") && !c.query) {
      switch_result(sw_.disconnect({}));
      return std::nullopt;
    }
    push_error(-113, "Undefined header");
    return std::nullopt;
  }

  std::optional<std::string> common(const ScpiCommand& c) {
    const std::string& h = c.header[0];
    if (h == "*IDN" && c.query)
      return fmt::format("Polatis,Series 6000 {}x{},OCSLAB-PEER-0001,7.1.2", sw_.ingress_ports(), sw_.egress_ports());
    if (h == "*OPC" && c.query) return "1";
    if (h == "*CLS" && !c.query) {
      errors_.clear();
      return std::nullopt;
    }
    if ((h == "*OPC" || h == "*WAI") && !c.query) return std::nullopt;  // every command completes at once
    push_error(-113, "Undefined header");
    return std::nullopt;
  }

  std::optional<std::string> port_query(const ScpiCommand& c) {
    Port p = 0;
    if (c.channel_lists.size() == 1 && c.channel_lists[0].size() == 1) {
      p = c.channel_lists[0][0];
    } else if (c.args.size() == 1) {
      try {
        p = std::stoi(c.args[0]);
      } catch (const std::exception&) {
        push_error(-104, "Data type error");
        return std::nullopt;
      }
    } else {
      push_error(-109, "Missing parameter");
      return std::nullopt;
    }
    if (!check_ports({p})) return std::nullopt;
    for (const auto& x : sw_.circuits()) {
      if (x.ingress == p) return "\"" + std::to_string(x.egress) + "\"";
      if (x.egress == p) return "\"" + std::to_string(x.ingress) + "\"";
    }
    return "\"0\"";
  }

  std::optional<std::string> power_query(const ScpiCommand& c) {
    if (c.channel_lists.size() != 1 || c.args.size() != 1) {
      push_error(-109, "Missing parameter; expected (@ports)");
      return std::nullopt;
    }
    if (!check_ports(c.channel_lists[0])) return std::nullopt;
    std::string out = "(";
    for (Port p : c.channel_lists[0]) out += fmt::format("{}{:.2f}", out.size() > 1 ? "," : "", sw_.power_dbm(p));
    return out + ")";
  }

  int in_, out_;
  PeerSwitch& sw_;
  const PeerQuirks& q_;
  ocs::ScpiErrorQueue errors_{kQueueDepth};
  bool muted_ = false;
};

}  // namespace

void serve_scpi_session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& quirks) {
  ScpiSession(in_fd, out_fd, sw, quirks).run();
}

}  // namespace ocslab::testing
