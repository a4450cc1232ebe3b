#include "ocslab/ocsctl/scpi_driver.h"

#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace ocslab::ocs {

namespace {

constexpr size_t kMaxLine = 1 << 20;  // no SCPI reply we ask for comes near this
constexpr int kMaxDrain = 32;         // deeper than any error queue we know of

const std::string kErrorQuery = ":SYST:ERR?";
const std::string kOpcQuery = "*OPC?";

}  // namespace

ScpiDriver::ScpiDriver(SwitchUrl url, DriverOptions options) : OcsDriver(std::move(url), std::move(options)) {}

ScpiDriver::~ScpiDriver() = default;

std::string ScpiDriver::read_line(Deadline deadline, const std::string& command) {
  if (!stream_) throw ConnectionError("not connected");
  // Bytes already searched for a line end: a long reply arriving in many reads is scanned
  // once, not from its start after every read.
  size_t scanned = 0;
  for (;;) {
    size_t nl = buffer_.find('\n', scanned);
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      scanned = 0;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      // A stray empty line (CRLF after LF, keep-alive) carries nothing; wait for the reply.
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      return line;
    }
    scanned = buffer_.size();
    if (buffer_.size() > kMaxLine) {
      throw ProtocolError(fmt::format("reply to {} exceeds {} bytes without a line end: {}", command, kMaxLine,
                                      scpi_quote(buffer_)));
    }
    std::string chunk = stream_->read_some(deadline);
    if (chunk.empty()) {
      // The transport waits in whole milliseconds and may give up a fraction early; the
      // deadline promised to the caller is the one that counts.
      if (Clock::now() < deadline) continue;
      throw TimeoutError(fmt::format("no reply to {} within {} ms", command, options().reply_timeout.count()));
    }
    buffer_ += chunk;
  }
}

template <class Parse>
auto ScpiDriver::query(const std::string& command, Parse&& parse) -> decltype(parse(std::string_view{})) {
  if (!stream_) throw ConnectionError("not connected");
  stamp_issued(command);
  Deadline deadline = reply_deadline();
  stream_->write(command + "\r\n");
  std::string line = read_line(deadline, command);
  auto result = parse(std::string_view(line));
  stamp_acked();
  return result;
}

// An IEEE 488.2 instrument reads a set command, starts it and goes on to the next line: the
// command's silence (and a :SYST:ERR? right behind it) marks its acceptance, not the end of
// switching. *OPC? is answered only when every operation in progress has finished, so it
// goes between the two: the call is acknowledged after switching, and the error query also
// sees an error raised while switching. One write, one deadline for the whole exchange.
void ScpiDriver::execute(const std::string& command) {
  if (!stream_) throw ConnectionError("not connected");
  stamp_issued(command);
  Deadline deadline = reply_deadline();
  stream_->write(command + "\r\n" + kOpcQuery + "\r\n" + kErrorQuery + "\r\n");
  // A refused command starts nothing, so *OPC? still answers; its error follows.
  parse_scpi_opc(read_line(deadline, "*OPC? (the end of switching)"));
  ScpiErrorEntry e = parse_scpi_error(read_line(deadline, kErrorQuery));
  if (e.code == 0) {
    stamp_acked();
    return;
  }
  // The command may have queued more than one error; leave the queue empty so the next
  // command's :SYST:ERR? reports that command and not this one. Best effort: if draining
  // fails, the connection is in an unknown state and the next call starts a fresh one.
  try {
    for (int i = 0; i < kMaxDrain; ++i) {
      stream_->write(kErrorQuery + "\r\n");
      if (parse_scpi_error(read_line(reply_deadline(), kErrorQuery)).code == 0) break;
    }
  } catch (const OcsError& drain_error) {
    spdlog::debug("{}: draining the SCPI error queue failed: {}", name(), drain_error.what());
    mark_lost();
  }
  // Left pending on purpose: the base class records the call as failed with this error.
  throw DenyError(fmt::format("switch error {}, \"{}\"", e.code, e.message), std::to_string(e.code), e.message);
}

void ScpiDriver::do_open() {
  do_close();
  stream_ = tcp_connect(url().host, url().port, options().connect_timeout);
  // *CLS first: a switch keeps its error queue across sessions, and a stale entry would
  // otherwise be taken for the refusal of our first set command.
  fresh_identity_ = query("*CLS;*IDN?", [](std::string_view l) { return parse_scpi_idn(l); });
}

void ScpiDriver::do_close() {
  if (stream_) stream_->close();
  stream_.reset();
  buffer_.clear();
  fresh_identity_.reset();
}

SwitchInfo ScpiDriver::do_info() {
  ScpiIdentity id;
  if (fresh_identity_) {
    id = std::move(*fresh_identity_);
    fresh_identity_.reset();
  } else {
    id = query("*IDN?", [](std::string_view l) { return parse_scpi_idn(l); });
  }
  auto [n, m] = query(":OXC:SWITch:SIZE?", [](std::string_view l) { return parse_scpi_size(l); });
  SwitchInfo info;
  info.vendor = id.vendor;
  info.model = id.model;
  info.serial = id.serial;
  info.version = id.version;
  info.ingress_ports = n;
  info.egress_ports = m;
  return info;
}

std::vector<Circuit> ScpiDriver::do_list() {
  return query(":OXC:SWITch:CONNect:STATe?", [](std::string_view l) { return parse_scpi_connections(l); });
}

std::vector<std::string> ScpiDriver::render_commands(const MappingDiff& diff) const {
  std::vector<std::string> out;
  if (!diff.remove.empty()) out.push_back(":OXC:SWITch:CONNect:SUB " + format_scpi_connections(diff.remove));
  if (!diff.add.empty()) out.push_back(":OXC:SWITch:CONNect:ADD " + format_scpi_connections(diff.add));
  return out;
}

void ScpiDriver::do_connect(const std::vector<Circuit>& circuits) {
  if (circuits.empty()) return;
  execute(":OXC:SWITch:CONNect:ADD " + format_scpi_connections(circuits));
}

void ScpiDriver::do_disconnect(const std::vector<Port>& ports) {
  if (ports.empty()) return;
  // SUB takes circuits (ingress and egress lists), while callers name ports at either end.
  set_op("list");
  std::set<Port> asked(ports.begin(), ports.end());
  std::vector<Circuit> affected;
  for (const auto& c : do_list()) {
    if (asked.count(c.ingress) || asked.count(c.egress)) affected.push_back(c);
  }
  set_op("disconnect");
  if (affected.empty()) return;
  execute(":OXC:SWITch:CONNect:SUB " + format_scpi_connections(affected));
}

std::vector<PortPower> ScpiDriver::do_power(const std::vector<Port>& ports) {
  if (ports.empty()) return {};
  const std::string command = ":PMON:POW? " + format_scpi_channel_list(ports);
  auto values = query(command, [&](std::string_view l) {
    auto v = parse_scpi_power(l);
    if (v.size() != ports.size()) {
      throw ProtocolError(
          fmt::format("asked for {} ports, got {} power values: {}", ports.size(), v.size(), scpi_quote(l)));
    }
    return v;
  });
  std::vector<PortPower> out;
  out.reserve(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) out.push_back({ports[i], values[i]});
  return out;
}

}  // namespace ocslab::ocs
