// TL1 grammar peer (docs/protocols.md#tl1): enough of a Polatis to exercise the driver's parser,
// matching and error paths, with the PeerQuirks faults on top.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/tl1_codec.h"
#include "ocslab/testing/peers.h"

namespace ocslab::testing {

namespace {

using ocs::Circuit;
using ocs::Port;

constexpr const char* kSid = "OCS-PEER";

struct Reply {
  bool ok = true;
  std::vector<std::string> data;
  std::string code;     // DENY code
  std::string comment;  // DENY text
};

Reply deny(std::string code, std::string comment) { return Reply{false, {}, std::move(code), std::move(comment)}; }

class Tl1Session {
 public:
  Tl1Session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& q)
      : in_(in_fd),
        out_(out_fd),
        sw_(sw),
        q_(q),
        eol_(q.bare_lf ? "\n" : "\r\n"),
        // sshd starts the stdio peer only after SSH authentication: that session starts logged in.
        logged_in_(in_fd != out_fd) {}

  void run() {
    std::string buf;
    char chunk[4096];
    for (;;) {
      ssize_t n = ::read(in_, chunk, sizeof(chunk));
      if (n <= 0) return;
      buf.append(chunk, static_cast<size_t>(n));
      for (;;) {
        size_t end = command_end(buf);
        if (end == std::string::npos) break;
        std::string cmd = buf.substr(0, end + 1);
        buf.erase(0, end + 1);
        size_t first = cmd.find_first_not_of(" \t\r\n");
        cmd = cmd.substr(first);
        if (!handle(cmd)) return;
      }
      // Leading line ends between commands carry nothing; keep the buffer small.
      size_t first = buf.find_first_not_of(" \t\r\n");
      buf.erase(0, first == std::string::npos ? buf.size() : first);
    }
  }

 private:
  // Index of the ';' that ends the first command, outside double quotes.
  static size_t command_end(const std::string& buf) {
    bool quoted = false;
    for (size_t i = 0; i < buf.size(); ++i) {
      if (quoted && buf[i] == '\\') {
        ++i;
      } else if (buf[i] == '"') {
        quoted = !quoted;
      } else if (!quoted && buf[i] == ';') {
        return i;
      }
    }
    return std::string::npos;
  }

  static bool contains(const std::string& text, const std::string& needle) {
    return !needle.empty() && text.find(needle) != std::string::npos;
  }

  // A fault quirk matches, past the first faults_after matching commands (a session that
  // works for a while, then fails).
  bool fault(const std::string& text, const std::string& needle, int& seen) {
    return contains(text, needle) && ++seen > q_.faults_after;
  }

  // Returns false when the session must end.
  bool handle(const std::string& text) {
    sw_.record(text);
    if (fault(text, q_.drop_on, drops_seen_)) return false;
    if (contains(text, q_.never_reply_to)) return true;
    std::string ctag = "0";
    if (q_.reply_delay_ms > 0)
      // load-safe: the reply_delay_ms quirk: a slow switch, a lower bound that load only lengthens.
      std::this_thread::sleep_for(std::chrono::milliseconds(q_.reply_delay_ms));  // kept: the reply_delay_ms quirk
    if (contains(text, q_.garbage_on)) return send("\x02\x7f#@! garbage 0xDEADBEEF" + eol_);
    Reply r;
    try {
      ocs::Tl1Command cmd = ocs::parse_tl1_command(text);
      ctag = cmd.ctag;
      if (fault(text, q_.deny_on, denies_seen_)) {
        r = deny("SRCN", "Command refused by the switch");
      } else {
        r = execute(cmd);
      }
    } catch (const ocs::ProtocolError& e) {
      r = deny("IICT", e.what());
    }
    std::string out;
    if (q_.autonomous) out += autonomous();
    out += response(ctag, r);
    return send(out);
  }

  Reply execute(const ocs::Tl1Command& c) {
    const int ports = sw_.ingress_ports() + sw_.egress_ports();
    if (c.verb == "ACT-USER") {
      std::string pw = c.positional.empty() ? "" : c.positional.front();
      if (c.aid != q_.user || pw != q_.password) return deny("PICC", "Invalid user name or password");
      logged_in_ = true;
      return {};
    }
    if (!logged_in_) return deny("PICC", "Not logged in");
    if (c.verb == "CANC-USER") {
      logged_in_ = false;
      return {};
    }
    if (c.verb == "RTRV-HDR") return {};
    if (c.verb == "RTRV-NETYPE") return Reply{true, {"POLATIS,6000,OXC,7.1"}, {}, {}};
    if (c.verb == "RTRV-EQPT") {
      if (c.aid != "SYSTEM") return deny("IIAC", "Invalid equipment: " + c.aid);
      auto it = c.params.find("PARAMETER");
      if (it == c.params.end()) return deny("IPMS", "Missing PARAMETER");
      if (it->second != "SIZE") return deny("IPNV", "Unknown parameter: " + it->second);
      return Reply{true, {fmt::format("SYSTEM:SIZE={}x{}", sw_.ingress_ports(), sw_.egress_ports())}, {}, {}};
    }
    if (c.verb == "ENT-PATCH") {
      if (c.aid.empty()) return deny("IIAC", "Missing patch ports");
      std::vector<Circuit> cs;
      try {
        // Parsed without a bound so an out-of-range port gets the switch's own wording below.
        cs = ocs::parse_tl1_patch_aid(c.aid, 1 << 30);
      } catch (const ocs::ProtocolError& e) {
        return deny("IIAC", e.what());
      }
      std::string err = sw_.connect(cs, q_.replace_patched);
      if (!err.empty()) return deny("IDNV", err);
      return {};
    }
    if (c.verb == "DLT-PATCH" || c.verb == "RTRV-PATCH" || c.verb == "RTRV-PORT-POWER") {
      std::vector<Port> list;
      const bool all = c.aid.empty() || c.aid == "ALL" || c.aid == "all";
      try {
        list = ocs::parse_tl1_port_list(c.aid, all ? ports : 1 << 30);
      } catch (const ocs::ProtocolError& e) {
        return deny("IIAC", e.what());
      }
      for (Port p : list) {
        if (!sw_.valid(p)) return deny("IDNV", "Invalid OXC port: " + std::to_string(p));
      }
      if (c.verb == "DLT-PATCH") {
        std::string err = sw_.disconnect(all ? std::vector<Port>{} : list);
        if (!err.empty()) return deny("IDNV", err);
        return {};
      }
      Reply r;
      if (c.verb == "RTRV-PATCH") {
        std::set<Port> want(list.begin(), list.end());
        for (const auto& cc : sw_.circuits()) {
          if (all || want.count(cc.ingress) || want.count(cc.egress)) {
            r.data.push_back(fmt::format("{},{}", cc.ingress, cc.egress));
          }
        }
      } else {
        for (Port p : list) r.data.push_back(fmt::format("{}:{:.2f}", p, sw_.power_dbm(p)));
      }
      return r;
    }
    return deny("ICNV", "Unknown command: " + c.verb);
  }

  std::string header() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof(when), "%y-%m-%d %H:%M:%S", &tm);
    return fmt::format("   {} {}{}", kSid, when, eol_);
  }

  std::string terminator() { return ";" + eol_ + (q_.prompt ? "<" : ""); }

  std::string response(const std::string& ctag, const Reply& r) {
    return header() + ocs::format_tl1_response_body(ctag, r.ok, r.data, r.code, r.comment, eol_) + terminator();
  }

  std::string autonomous() {
    ++atag_;
    bool alarm = atag_ % 2 == 1;
    return header() +
           fmt::format("{} {} {}{}", alarm ? "*C" : "A ", 1000 + atag_, alarm ? "REPT ALM EQPT" : "REPT EVT PORT",
                       eol_) +
           "   " + ocs::tl1_quote_data(alarm ? "PSU-1:CR,PWR,SA:\"Power supply 1 failed\"" : "5:LOS,TC") + eol_ +
           terminator();
  }

  bool send(const std::string& data) {
    if (!q_.split_writes) return write_all(out_, data);
    for (size_t i = 0; i < data.size(); i += 3) {
      if (!write_all(out_, data.substr(i, 3))) return false;
      // load-safe: the split_writes quirk paces its pieces.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // kept: the split_writes quirk paces its pieces
    }
    return true;
  }

  int in_, out_;
  PeerSwitch& sw_;
  PeerQuirks q_;
  std::string eol_;
  bool logged_in_;
  int drops_seen_ = 0;   // commands that matched drop_on so far
  int denies_seen_ = 0;  // commands that matched deny_on so far
  int atag_ = 0;
};

}  // namespace

void serve_tl1_session(int in_fd, int out_fd, PeerSwitch& sw, const PeerQuirks& quirks) {
  Tl1Session(in_fd, out_fd, sw, quirks).run();
}

}  // namespace ocslab::testing
