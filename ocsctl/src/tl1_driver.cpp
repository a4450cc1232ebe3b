#include "ocslab/ocsctl/tl1_driver.h"
#include "ocslab/common/text.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <mutex>
#include <set>

#include "ocslab/ocsctl/credentials.h"
#include "string_reuse.h"

namespace ocslab::ocs {

namespace {

template <class T>
bool parse_number(std::string_view s, T& out) {
  s = trim_blanks(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// What TL1 can carry in a login field (ACT-USER's user and password) unquoted: the
// characters below end the command, separate its blocks or parameters, group values, or
// quote; blanks and control characters are dropped or refused by switches.
constexpr const char* kTl1LoginRule =
    "TL1 login fields are printable ASCII without blanks, control characters or any of ; : , = & \" \\ "
    "(they end or split the command)";

bool tl1_login_sendable(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
    if (std::string_view(";:,=&\"\\").find(c) != std::string_view::npos) return false;
  }
  return true;
}

// Raw TCP carries the ACT-USER password as typed: said once per switch and process, unless
// the switch is on this machine.
void warn_clear_text_once(const SwitchUrl& url) {
  if (is_loopback_host(url.host)) return;
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (!warned.insert(url.to_string()).second) return;
  spdlog::warn("{}: the TL1 password travels in clear text over TCP to {}; use tl1+ssh:// where the switch offers it",
               url.to_string(), url.host);
}

[[noreturn]] void bad_data(const std::string& command, const std::string& what, const std::string& line) {
  throw ProtocolError(fmt::format("unexpected reply to {}: {} in line \"{}\"", command, what, tl1_quote_line(line)));
}

}  // namespace

Tl1Driver::Tl1Driver(SwitchUrl url, DriverOptions options) : OcsDriver(std::move(url), std::move(options)) {
  // Refused here, before any connection: such a login would break the command or log in with
  // something else than what was configured.
  if (!tl1_login_sendable(user())) {
    throw Error(fmt::format("{}: the user name cannot be sent over TL1: {}", name(), kTl1LoginRule));
  }
  if (this->options().password && !tl1_login_sendable(*this->options().password)) {
    throw Error(fmt::format("{}: the password for {}@{} cannot be sent over TL1: {}; change it on the switch", name(),
                            user(), this->url().host, kTl1LoginRule));
  }
}

Tl1Driver::~Tl1Driver() {
  stop_keepalive();
  std::lock_guard lock(call_mutex());
  close_stream();
}

std::string Tl1Driver::user() const { return url().user.empty() ? "admin" : url().user; }

void Tl1Driver::do_open() {
  close_stream();
  parser_.reset();
  const bool ssh = url().protocol == Protocol::kTl1Ssh;
  if (!ssh && !options().password) {
    throw ConnectionError(
        fmt::format("no password for {}@{}: set OCSLAB_OCS_PASSWORD or a credentials file", user(), url().host));
  }
  if (ssh) {
    SshOptions o;
    o.host = url().host;
    o.port = url().port;
    o.user = user();
    o.password = options().password;
    o.identity_file = options().identity_file;
    o.known_hosts_file = options().known_hosts_file;
    o.accept_unknown_host = options().accept_unknown_host;
    o.connect_timeout = options().connect_timeout;
    stream_ = ssh_open(o);
  } else {
    if (options().password) warn_clear_text_once(url());
    stream_ = tcp_connect(url().host, url().port, options().connect_timeout);
  }
  last_io_ = Clock::now();
  // Over SSH the SSH login already authenticated the session; a configured password means the
  // switch also wants a TL1 login on top.
  if (options().password) {
    std::string c = next_ctag();
    std::string head = fmt::format("ACT-USER::{}:{}::", user(), c);
    transact(head + *options().password + ";\r\n", head + "******;", c);
    logged_in_ = true;
  }
  if (options().keepalive_interval.count() > 0 && !keepalive_.joinable()) {
    keepalive_ = std::thread([this] { keepalive_loop(); });
  }
}

void Tl1Driver::close_stream() {
  if (!stream_) return;
  if (logged_in_) {
    // Best effort: the switch frees the session sooner, but a dead link must not delay close.
    try {
      std::string c = next_ctag();
      std::string cmd = fmt::format("CANC-USER::{}:{}:;", user(), c);
      transact(cmd + "\r\n", cmd, c, false, std::min(options().reply_timeout, std::chrono::milliseconds(2000)));
    } catch (const std::exception& e) {
      spdlog::debug("{}: logout failed: {}", name(), e.what());
    }
  }
  logged_in_ = false;
  try {
    stream_->close();
  } catch (const std::exception& e) {
    spdlog::debug("{}: close failed: {}", name(), e.what());
  }
  stream_.reset();
  parser_.reset();
}

void Tl1Driver::do_close() { close_stream(); }

const Tl1Block& Tl1Driver::transact(std::string_view line, std::string_view shown, std::string_view ctag, bool timed,
                                    std::chrono::milliseconds timeout) {
  try {
    return exchange(line, shown, ctag, timed, timeout);
  } catch (const DenyError&) {
    throw;
  } catch (const OcsError&) {
    // The session state is unknown now: the base class drops the stream, and a logout on it
    // would only delay the error.
    logged_in_ = false;
    throw;
  }
}

const Tl1Block& Tl1Driver::exchange(std::string_view line, std::string_view shown, std::string_view ctag, bool timed,
                                    std::chrono::milliseconds timeout) {
  if (!stream_) throw ConnectionError("not connected");
  if (timeout.count() <= 0) timeout = options().reply_timeout;
  // A timed request's issue stamp, read right before the write, starts the reply timeout: a
  // clock read fewer per request (steady_clock is CLOCK_MONOTONIC, as the stamp is). A write
  // does not wait for the peer unless the socket buffer is full, which a lockstep exchange of
  // short requests does not reach; the timeout then includes the write, as the user sees it.
  Clock::time_point sent{};
  if (timed) sent = Clock::time_point(std::chrono::nanoseconds(stamp_issued(shown).monotonic_ns));
  stream_->write(line);
  if (!timed) sent = Clock::now();
  last_io_ = sent;
  const Deadline deadline = sent + timeout;
  bool first_read = true;
  std::vector<std::string> data;  // RTRV intermediate blocks add to the final one
  // Bytes left from before the request (an autonomous message) are parsed first; usually there
  // are none, and the loop starts with the read.
  for (bool parse = parser_.has_input();; parse = true) {
    while (Tl1Block* block = parse ? parser_.next_block(false) : nullptr) {
      if (block->kind == Tl1Block::Kind::kAutonomous) {
        emit_event(OcsEvent{now(), parser_.block_text()});
        continue;
      }
      if (block->tag != ctag) {
        spdlog::debug("{}: ignoring reply for ctag {} while waiting for {}: {}", name(), block->tag, ctag,
                      block->status);
        continue;
      }
      if (block->status == "RTRV") {
        data.insert(data.end(), std::make_move_iterator(block->data.begin()),
                    std::make_move_iterator(block->data.end()));
        continue;
      }
      if (block->status == "COMPLD" || block->status == "DELAY") {
        // The acknowledgment's monotonic reading is steady_clock's (both CLOCK_MONOTONIC): one
        // clock read fewer per request.
        last_io_ = timed ? Clock::time_point(std::chrono::nanoseconds(stamp_acked().monotonic_ns)) : Clock::now();
        if (!data.empty()) {
          data.insert(data.end(), std::make_move_iterator(block->data.begin()),
                      std::make_move_iterator(block->data.end()));
          block->data = std::move(data);
        }
        return *block;
      }
      last_io_ = Clock::now();
      // The switch's words go into errors and logs: control bytes escaped, cut to ~200
      // characters, so a broken or hostile switch cannot write terminal escapes or flood them.
      std::string code = tl1_quote_line(block->error_code.empty() ? block->status : block->error_code);
      std::string text = tl1_quote_line(block->comment);
      if (text.empty() && !block->data.empty()) text = tl1_quote_line(block->data.front());
      // Timed requests are named by the base class's error context; untimed ones (login,
      // logout, keep-alive) are not, so they name themselves.
      throw DenyError(fmt::format("{}refused by the switch: {} {}{}", timed ? "" : std::string(shown) + " ",
                                  block->status, code, text.empty() ? "" : " (" + text + ")"),
                      code, text);
    }
    // Straight into the parser's buffer: no copy of the bytes in between.
    size_t got = parser_.feed_from([&](std::string& buf) {
      // The first read reuses the clock reading taken around the write; later ones read it anew.
      return first_read ? stream_->read_append(deadline, buf, sent) : stream_->read_append(deadline, buf);
    });
    first_read = false;
    // Transports round their poll down to whole milliseconds: only a passed deadline counts.
    if (got == 0 && Clock::now() < deadline) continue;
    if (got == 0) {
      throw TimeoutError(fmt::format("no reply to {} within {} ms", shown, timeout.count()));
    }
  }
}

char* Tl1Driver::line_buffer(size_t size) {
  if (size > line_capacity_) {
    line_capacity_ = std::max(size, 2 * line_capacity_);
    line_ = std::make_unique_for_overwrite<char[]>(line_capacity_);
  }
  return line_.get();
}

namespace {
char* put(char* out, std::string_view s) { return std::copy(s.begin(), s.end(), out); }
}  // namespace

const Tl1Block& Tl1Driver::request(std::string_view head, std::string_view tail) {
  char* line = line_buffer(head.size() + kAfterHead + tail.size());
  return send_line(put(line, head), tail);
}

const Tl1Block& Tl1Driver::send_line(char* at, std::string_view tail) {
  // The ctag goes straight into the request, which ends with the line end it is written with.
  char* const begin = line_.get();
  char* const ctag = at;
  at = std::to_chars(at, at + kMaxCtag, ctag_++).ptr;
  const std::string_view ctag_text(ctag, static_cast<size_t>(at - ctag));
  at = put(at, tail);
  const std::string_view shown(begin, static_cast<size_t>(at - begin));
  at = put(at, "\r\n");
  return transact(std::string_view(begin, static_cast<size_t>(at - begin)), shown, ctag_text);
}

SwitchInfo Tl1Driver::do_info() {
  SwitchInfo info;
  {
    const Tl1Block& b = request("RTRV-NETYPE:::", ":;");
    if (b.data.empty()) bad_data("RTRV-NETYPE", "no data line", parser_.block_text());
    std::vector<std::string> f;
    std::string_view s = b.data.front();
    for (size_t start = 0;;) {
      size_t comma = s.find(',', start);
      f.emplace_back(
          trim_blanks(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (f.size() < 4) bad_data("RTRV-NETYPE", "want <vendor>,<model>,<type>,<version>", b.data.front());
    info.vendor = f[0];
    info.model = f[1];
    info.version = f[3];
  }
  {
    const Tl1Block& b = request("RTRV-EQPT::SYSTEM:", ":::PARAMETER=SIZE;");
    bool found = false;
    for (const auto& line : b.data) {
      size_t at = line.find("SIZE=");
      if (at == std::string::npos) continue;
      std::string_view v = std::string_view(line).substr(at + 5);
      size_t x = v.find_first_of("xX");
      if (x == std::string_view::npos || !parse_number(v.substr(0, x), info.ingress_ports) ||
          !parse_number(v.substr(x + 1), info.egress_ports) || info.ingress_ports < 1 || info.egress_ports < 1) {
        bad_data("RTRV-EQPT", "want SIZE=<N>x<M>", line);
      }
      found = true;
    }
    if (!found) bad_data("RTRV-EQPT", "no SIZE=<N>x<M>", parser_.block_text());
  }
  return info;
}

std::vector<Circuit> Tl1Driver::do_list() {
  const Tl1Block& b = request("RTRV-PATCH:::", ":;");
  std::vector<Circuit> out;
  for (const auto& line : b.data) {
    std::string_view s = line;
    size_t comma = s.find(',');
    Circuit c;
    if (comma == std::string_view::npos || !parse_number(s.substr(0, comma), c.ingress) ||
        !parse_number(s.substr(comma + 1), c.egress)) {
      bad_data("RTRV-PATCH", "want \"<ingress>,<egress>\"", line);
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
// Patch commands list their ports in ascending order, so that runs compress to a&&b. Input
// already in order (the usual case) is used as it is; otherwise a sorted copy in scratch.
const std::vector<Circuit>& sorted(const std::vector<Circuit>& circuits, std::vector<Circuit>& scratch) {
  if (std::is_sorted(circuits.begin(), circuits.end())) return circuits;
  scratch.assign(circuits.begin(), circuits.end());
  std::sort(scratch.begin(), scratch.end());
  return scratch;
}
// The same for ports, also without repeats.
const std::vector<Port>& sorted_unique(const std::vector<Port>& ports, std::vector<Port>& scratch) {
  if (std::adjacent_find(ports.begin(), ports.end(), std::greater_equal<Port>()) == ports.end()) return ports;
  scratch.assign(ports.begin(), ports.end());
  std::sort(scratch.begin(), scratch.end());
  scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
  return scratch;
}

// The command text before the ctag, appended to out.
void append_ent_patch_head(std::string& out, const std::vector<Circuit>& circuits, std::vector<Circuit>& scratch) {
  out += "ENT-PATCH::";
  append_tl1_patch_aid(out, sorted(circuits, scratch));
  out += ':';
}
void append_dlt_patch_head(std::string& out, const std::vector<Port>& ports, std::vector<Port>& scratch) {
  out += "DLT-PATCH::";
  append_tl1_port_list(out, sorted_unique(ports, scratch));
  out += ':';
}

std::string ent_patch_head(const std::vector<Circuit>& circuits) {
  std::string out;
  std::vector<Circuit> scratch;
  append_ent_patch_head(out, circuits, scratch);
  return out;
}
std::string dlt_patch_head(const std::vector<Port>& ports) {
  std::string out;
  std::vector<Port> scratch;
  append_dlt_patch_head(out, ports, scratch);
  return out;
}
}  // namespace

std::vector<std::string> Tl1Driver::render_commands(const MappingDiff& diff) const {
  std::vector<std::string> out;
  if (!diff.remove.empty()) {
    std::vector<Port> ingress;
    for (const auto& c : diff.remove) ingress.push_back(c.ingress);
    out.push_back(dlt_patch_head(ingress) + "<ctag>:;");
  }
  if (!diff.add.empty()) out.push_back(ent_patch_head(diff.add) + "<ctag>:;");
  return out;
}

// Patch requests are written straight into the line buffer: no string appends per request.
void Tl1Driver::do_connect(const std::vector<Circuit>& circuits) {
  const std::vector<Circuit>& sorted_circuits = sorted(circuits, sorted_circuits_);
  constexpr std::string_view head = "ENT-PATCH::", tail = ":;";
  char* p = line_buffer(head.size() + max_tl1_patch_aid_size(sorted_circuits.size()) + 1 + kAfterHead + tail.size());
  p = write_tl1_patch_aid(put(p, head), sorted_circuits);
  *p++ = ':';
  send_line(p, tail);
}

void Tl1Driver::do_disconnect(const std::vector<Port>& ports) {
  const std::vector<Port>& sorted_ports = sorted_unique(ports, sorted_ports_);
  constexpr std::string_view head = "DLT-PATCH::", tail = ":;";
  char* p = line_buffer(head.size() + max_tl1_port_list_size(sorted_ports.size()) + 1 + kAfterHead + tail.size());
  p = write_tl1_port_list(put(p, head), sorted_ports);
  *p++ = ':';
  send_line(p, tail);
}

std::vector<PortPower> Tl1Driver::do_power(const std::vector<Port>& ports) {
  if (ports.empty()) return {};
  const Tl1Block& b = request("RTRV-PORT-POWER::" + format_tl1_port_list(ports) + ":", ":;");
  std::vector<PortPower> out;
  for (const auto& line : b.data) {
    std::string_view s = line;
    size_t colon = s.find(':');
    PortPower pp;
    if (colon == std::string_view::npos || !parse_number(s.substr(0, colon), pp.port)) {
      bad_data("RTRV-PORT-POWER", "want \"<port>:<dBm>\"", line);
    }
    // from_chars for double is in GCC 11+, but strtod also accepts the switch's "-inf".
    std::string v(trim_blanks(s.substr(colon + 1)));
    char* end = nullptr;
    pp.dbm = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size()) bad_data("RTRV-PORT-POWER", "bad dBm value", line);
    out.push_back(pp);
  }
  return out;
}

void Tl1Driver::keepalive_loop() {
  const auto interval = options().keepalive_interval;
  std::unique_lock lk(keepalive_mutex_);
  Clock::time_point wake = Clock::now() + interval;
  while (!stopping_) {
    keepalive_cv_.wait_until(lk, wake, [&] { return stopping_; });
    if (stopping_) break;
    lk.unlock();
    {
      // A user call in progress holds this mutex: the keep-alive never interleaves with it.
      std::lock_guard call(call_mutex());
      if (stream_ && Clock::now() >= last_io_ + interval) {
        std::string c = next_ctag();
        std::string cmd = "RTRV-HDR:::" + c + ";";
        try {
          transact(cmd + "\r\n", cmd, c, false);
        } catch (const std::exception& e) {
          spdlog::warn("{}: keep-alive failed, reconnecting on the next call: {}", name(), e.what());
          close_stream();
          mark_lost();
        }
      }
      wake = (stream_ ? last_io_ : Clock::now()) + interval;
    }
    lk.lock();
  }
}

void Tl1Driver::stop_keepalive() {
  {
    std::lock_guard lk(keepalive_mutex_);
    stopping_ = true;
  }
  keepalive_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

}  // namespace ocslab::ocs
