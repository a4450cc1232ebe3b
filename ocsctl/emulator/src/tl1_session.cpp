#include "ocslab/emulator/tl1_session.h"

#include <fmt/format.h>

#include <ctime>
#include <set>

#include "ocslab/ocsctl/errors.h"

namespace ocslab::emu {

namespace {

// The text inside /* */ must not end the comment early or break the line structure.
std::string comment_safe(std::string s) {
  for (auto& c : s) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  for (size_t at; (at = s.find("*/")) != std::string::npos;) s.replace(at, 2, "* /");
  return s;
}

// Best effort for a command the codec refused: the 4th ':'-separated field is the ctag, so a
// client waiting on it still gets its DENY.
std::string guess_ctag(const std::string& text) {
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    pos = text.find(':', pos);
    if (pos == std::string::npos) return "0";
    ++pos;
  }
  size_t end = text.find_first_of(":;", pos);
  std::string tag = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  bool ok = !tag.empty() && tag.size() <= 32;
  for (char c : tag) ok = ok && std::isalnum(static_cast<unsigned char>(c));
  return ok ? tag : "0";
}

// The first number in a port list outside 1..limit, so the reply can use the switch's own
// wording ("Invalid OXC port: N") before the codec would expand a huge range.
std::optional<long long> out_of_range(const std::string& aid, int limit) {
  for (size_t i = 0; i < aid.size();) {
    if (!std::isdigit(static_cast<unsigned char>(aid[i]))) {
      ++i;
      continue;
    }
    long long v = 0;
    while (i < aid.size() && std::isdigit(static_cast<unsigned char>(aid[i]))) {
      if (v < 1'000'000'000'000LL) v = v * 10 + (aid[i] - '0');
      ++i;
    }
    if (v < 1 || v > limit) return v;
  }
  return std::nullopt;
}

}  // namespace

Tl1Session::Tl1Session(SwitchModel& model, GroundTruth& truth, const ControlPlaneConfig& config, SendFn send,
                       Tl1SessionOptions options, CloseFn close)
    : ProtocolSession(model, truth, config, std::move(send), std::move(close), "tl1"),
      logged_in_(options.logged_in),
      events_(std::move(options.events)) {
  if (config_.autonomous && events_) {
    light_sub_ = events_->add([this](Port egress, bool lit, double dbm) { on_light(egress, lit, dbm); });
  }
}

Tl1Session::~Tl1Session() { Tl1Session::closed(); }

void Tl1Session::closed() {
  ProtocolSession::closed();
  if (light_sub_ && events_) events_->remove(light_sub_);
  light_sub_ = 0;
  queue_.clear();
}

void Tl1Session::on_bytes(std::string_view bytes) {
  if (is_closed()) return;
  for (char ch : bytes) {
    if (discarding_) {
      // The rest of an over-long command: nothing in it can be trusted.
      if (ch == ';') discarding_ = false;
      continue;
    }
    if (buf_.empty() && (ch == '\r' || ch == '\n' || ch == ' ' || ch == '\t')) continue;
    buf_ += ch;
    if (in_quote_) {
      // A ';' inside a quoted value does not end the command.
      if (escaped_)
        escaped_ = false;
      else if (ch == '\\')
        escaped_ = true;
      else if (ch == '"')
        in_quote_ = false;
    } else if (ch == '"') {
      in_quote_ = true;
    } else if (ch == ';') {
      queue_.push_back(std::move(buf_));
      buf_.clear();
    }
    if (buf_.size() > kMaxCommand) {
      buf_.clear();
      in_quote_ = escaped_ = false;
      discarding_ = true;
      queue_.push_back({});  // an empty entry stands for "over-long": DENY in order
    }
  }
  // A client that pipelines without reading while a patch settles must not grow us forever.
  if (queue_.size() > kMaxQueued) {
    queue_.clear();
    request_close();
    return;
  }
  pump();
}

void Tl1Session::pump() {
  while (!busy_ && !queue_.empty() && !is_closed()) {
    std::string cmd = std::move(queue_.front());
    queue_.pop_front();
    if (!handle(cmd)) busy_ = true;
  }
}

bool Tl1Session::handle(const std::string& text) {
  if (text.empty()) {
    record_command("INVALID");
    finish("0", "INVALID", deny("IICT", fmt::format("Command longer than {} bytes discarded", kMaxCommand)));
    return true;
  }
  ocs::Tl1Command cmd;
  try {
    cmd = ocs::parse_tl1_command(text);
  } catch (const ocs::ProtocolError& e) {
    record_command("INVALID");
    finish(guess_ctag(text), "INVALID", deny("IICT", e.what()));
    return true;
  }
  std::string verb = cmd.verb;
  if (verb.empty() || verb.size() > 64) verb = "INVALID";
  record_command(verb);
  bool later = false;
  Reply r = execute(cmd, verb, later);
  if (later) return false;
  finish(cmd.ctag, verb, r);
  return true;
}

std::optional<Tl1Session::Reply> Tl1Session::port_list(const std::string& aid, std::vector<Port>& out,
                                                       bool& all) const {
  all = aid.empty() || aid == "ALL" || aid == "all";
  if (all) return std::nullopt;
  if (auto bad = out_of_range(aid, model_.total_ports()))
    return deny("IDNV", fmt::format("Invalid OXC port: {}", *bad));
  try {
    out = ocs::parse_tl1_port_list(aid, model_.total_ports());
  } catch (const ocs::ProtocolError& e) {
    return deny("IIAC", e.what());
  }
  return std::nullopt;
}

Tl1Session::Reply Tl1Session::execute(const ocs::Tl1Command& c, const std::string& verb, bool& later) {
  if (verb == "ACT-USER") {
    std::string pw = c.positional.empty() ? "" : c.positional.front();
    if (!login_matches(config_, c.aid, pw)) return deny("PICC", "Invalid user name or password");
    logged_in_ = true;
    return {};
  }
  if (!logged_in_) return deny("PICC", "Not logged in");
  const auto& p = model_.params();
  if (verb == "CANC-USER") {
    logged_in_ = false;
    return {};
  }
  if (verb == "RTRV-HDR") return {};
  if (verb == "RTRV-NETYPE") return Reply{true, {fmt::format("{},{},OXC,{}", p.vendor, p.model, p.version)}, {}, {}};
  if (verb == "RTRV-EQPT") {
    if (c.aid != "SYSTEM") return deny("IIAC", "Invalid equipment: " + c.aid);
    auto it = c.params.find("PARAMETER");
    if (it == c.params.end()) return deny("IPMS", "Missing PARAMETER");
    if (it->second != "SIZE") return deny("IPNV", "Unknown parameter: " + it->second);
    return Reply{true, {fmt::format("SYSTEM:SIZE={}x{}", p.ingress_ports, p.egress_ports)}, {}, {}};
  }
  if (verb == "ENT-PATCH") return enter_patch(c, verb, later);

  std::vector<Port> list;
  bool all = false;
  if (verb == "DLT-PATCH" || verb == "RTRV-PATCH" || verb == "RTRV-PORT-POWER" || verb == "SET-PORT-PMON" ||
      verb == "RTRV-PORT-PMON" || verb == "OPR-PORT-SHUTTER" || verb == "RLS-PORT-SHUTTER" ||
      verb == "RTRV-PORT-SHUTTER") {
    if (auto refused = port_list(c.aid, list, all)) return *refused;
    if (all && verb != "DLT-PATCH") {
      list.clear();
      for (Port x = 1; x <= model_.total_ports(); ++x) list.push_back(x);
    }
  }
  if (verb == "DLT-PATCH") {
    if (auto e = model_.disconnect(all ? std::vector<Port>{} : list)) return deny("IDNV", e->text);
    return {};
  }
  if (verb == "RTRV-PATCH") {
    std::set<Port> want(list.begin(), list.end());
    Reply r;
    for (const auto& x : model_.circuits()) {
      if (all || want.count(x.ingress) || want.count(x.egress))
        r.data.push_back(fmt::format("{},{}", x.ingress, x.egress));
    }
    return r;
  }
  if (verb == "RTRV-PORT-POWER") {
    Reply r;
    for (Port x : list) r.data.push_back(fmt::format("{}:{:.2f}", x, model_.power_dbm(x)));
    return r;
  }
  if (verb == "SET-PORT-PMON") {
    auto it = c.params.find("WAVE");
    if (it == c.params.end()) return deny("IPMS", "Missing WAVE");
    if (it->second.empty() || it->second.size() > 8 ||
        it->second.find_first_not_of("0123456789.") != std::string::npos) {
      return deny("IPNV", "Invalid WAVE: " + it->second);
    }
    for (Port x : list) pmon_wave_[x] = it->second;
    return {};
  }
  if (verb == "RTRV-PORT-PMON") {
    Reply r;
    for (Port x : list) {
      auto it = pmon_wave_.find(x);
      r.data.push_back(fmt::format("{}:WAVE={}", x, it == pmon_wave_.end() ? "1550" : it->second));
    }
    return r;
  }
  if (verb == "OPR-PORT-SHUTTER" || verb == "RLS-PORT-SHUTTER") {
    // Operating a shutter closes it (blocks the light); releasing opens it again.
    if (auto e = model_.set_shutter(list, verb == "OPR-PORT-SHUTTER")) return deny("IDNV", e->text);
    return {};
  }
  if (verb == "RTRV-PORT-SHUTTER") {
    Reply r;
    for (Port x : list) r.data.push_back(fmt::format("{}:{}", x, model_.shutter_closed(x) ? "CLOSED" : "OPEN"));
    return r;
  }
  return deny("ICNV", "Unknown command: " + verb);
}

Tl1Session::Reply Tl1Session::enter_patch(const ocs::Tl1Command& c, const std::string& verb, bool& later) {
  if (c.aid.empty()) return deny("IIAC", "Missing patch ports");
  std::vector<ocs::Circuit> circuits;
  if (auto bad = out_of_range(c.aid, model_.total_ports()))
    return deny("IDNV", fmt::format("Invalid OXC port: {}", *bad));
  try {
    circuits = ocs::parse_tl1_patch_aid(c.aid, model_.total_ports());
  } catch (const ocs::ProtocolError& e) {
    return deny("IIAC", e.what());
  }
  const bool wait = model_.params().ack_after_settle;
  std::weak_ptr<bool> alive = this->alive();
  std::string ctag = c.ctag;
  auto done = [this, alive, ctag, verb, wait] {
    if (!wait || alive.expired()) return;
    busy_ = false;
    finish(ctag, verb, Reply{});
    pump();
  };
  if (auto e = model_.connect(circuits, done)) {
    return deny(e->kind == ModelError::Kind::kBadRequest ? "IIAC" : "IDNV", e->text);
  }
  later = wait;
  return {};
}

void Tl1Session::finish(const std::string& ctag, const std::string& verb, const Reply& r) {
  if (is_closed()) return;
  const char* eol = "\r\n";
  std::string out = header() + ocs::format_tl1_response_body(ctag, r.ok, r.data, r.code, comment_safe(r.text), eol);
  out += terminator();
  record_ack(verb, r.ok);
  send(std::move(out));
}

void Tl1Session::on_light(Port egress, bool lit, double dbm) {
  if (is_closed() || !logged_in_) return;
  ++atag_;
  // Loss of light is a (non-service-affecting) condition; its return is a plain event.
  std::string out =
      header() + fmt::format("{} {} REPT {} PORT\r\n", lit ? "A " : "* ", 1000 + atag_, lit ? "EVT" : "ALM");
  out += "   " + ocs::tl1_quote_data(fmt::format("{}:{},{:.2f}", egress, lit ? "LIGHT" : "LOS", dbm)) + "\r\n";
  out += terminator();
  send(std::move(out));
}

std::string Tl1Session::header() const {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%y-%m-%d %H:%M:%S", &tm);
  return fmt::format("   {} {}\r\n", model_.params().name, when);
}

std::string Tl1Session::terminator() const { return config_.prompt ? ";\r\n<" : ";\r\n"; }

}  // namespace ocslab::emu
