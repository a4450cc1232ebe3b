#include "ocslab/ocsctl/netconf_driver.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

namespace ocslab::ocs {

namespace {

std::string ports_text(const std::vector<Port>& ports) {
  std::string out;
  for (Port p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

long long ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

}  // namespace

NetconfDriver::NetconfDriver(SwitchUrl url, DriverOptions options) : OcsDriver(std::move(url), std::move(options)) {}

NetconfDriver::~NetconfDriver() {
  try {
    do_close();
  } catch (const std::exception& e) {
    spdlog::debug("{}: error while closing: {}", name(), e.what());
  }
}

void NetconfDriver::do_open() {
  if (stream_) stream_->close();
  stream_.reset();
  decoder_ = FrameDecoder(Framing::kEndOfMessage);
  broken_ = false;

  SshOptions o;
  o.host = url().host;
  o.port = url().port;
  o.user = url().user.empty() ? "admin" : url().user;
  o.password = options().password;
  o.identity_file = options().identity_file;
  o.known_hosts_file = options().known_hosts_file;
  o.accept_unknown_host = options().accept_unknown_host;
  o.subsystem = "netconf";
  o.connect_timeout = options().connect_timeout;
  stream_ = ssh_open(o);

  // RFC 6242: both sides send <hello> at once, always end-of-message framed.
  send(build_hello({kNetconfBase10, kNetconfBase11}));
  auto msg = read_message(Clock::now() + options().connect_timeout,
                          fmt::format("no <hello> from the switch within {} ms", ms(options().connect_timeout)));
  try {
    server_hello_ = parse_hello(msg);
  } catch (const ProtocolError&) {
    broken_ = true;  // no session was established: nothing to close politely
    throw;
  }
  if (server_hello_.base11) decoder_.set_framing(Framing::kChunked);
  pair_name_ = pair_list_name(server_hello_.optical_revision);
  if (server_hello_.optical_revision.empty()) {
    spdlog::warn("{}: hello advertises no optical-switch module revision; assuming list name '{}'", name(),
                 pair_name_);
  }
  spdlog::debug("{}: NETCONF session {} ({} framing, optical-switch {}, list '{}')", name(),
                server_hello_.session_id, server_hello_.base11 ? "chunked" : "end-of-message",
                server_hello_.optical_revision, pair_name_);
}

void NetconfDriver::do_close() {
  if (!stream_) return;
  if (!broken_) {
    // Best effort: a polite close frees the switch's session slot at once.
    try {
      send(build_rpc(next_message_id_++, "<close-session/>"));
      auto wait = std::min(options().reply_timeout, std::chrono::milliseconds(2000));
      Deadline deadline = Clock::now() + wait;
      for (;;) {
        auto msg = read_message(deadline, "no reply to <close-session>");
        if (msg.kind == "rpc-reply") break;
      }
    } catch (const std::exception& e) {
      spdlog::debug("{}: close-session: {}", name(), e.what());
    }
  }
  stream_->close();
  stream_.reset();
}

void NetconfDriver::send(const std::string& xml) {
  if (!stream_) throw ConnectionError("not connected");
  try {
    // Our hello offers base:1.1, so our framing follows the server's choice, like the decoder's.
    stream_->write(encode_frame(xml, decoder_.framing()));
  } catch (const OcsError&) {
    broken_ = true;
    throw;
  }
}

NetconfMessage NetconfDriver::read_message(Deadline deadline, const std::string& timeout_text) {
  if (!stream_) throw ConnectionError("not connected");
  try {
    for (;;) {
      if (auto m = decoder_.next()) return parse_netconf_message(*m);
      std::string bytes = stream_->read_some(deadline);
      if (bytes.empty()) throw TimeoutError(timeout_text);
      decoder_.feed(bytes);
    }
  } catch (const OcsError&) {
    broken_ = true;  // timeouts, EOF and garbage all leave the session out of step
    throw;
  }
}

RpcReply NetconfDriver::rpc(const std::string& command, const std::string& body) {
  uint64_t id = next_message_id_++;
  std::string xml = build_rpc(id, body);
  std::string op = command.substr(0, command.find(' '));
  stamp_issued(command);
  send(xml);
  Deadline deadline = Clock::now() + options().reply_timeout;
  std::string timeout_text =
      fmt::format("no reply to <{}> (message-id {}) within {} ms", op, id, ms(options().reply_timeout));
  const std::string want = std::to_string(id);
  for (;;) {
    NetconfMessage msg = read_message(deadline, timeout_text);
    if (msg.kind == "notification") {
      emit_event({now(), xml_text(msg.root)});
      continue;
    }
    if (msg.kind != "rpc-reply") {
      broken_ = true;
      throw ProtocolError(fmt::format("expected <rpc-reply> to message-id {}, got <{}>", id, msg.kind));
    }
    std::string got = msg.root.attribute("message-id").value();
    // One rpc is outstanding at a time and a timeout drops the session, so any other id
    // means the session is out of step. A reply without an id (allowed for
    // malformed-message errors) is taken as ours.
    if (!got.empty() && got != want) {
      broken_ = true;
      throw ProtocolError(fmt::format("reply carries message-id {} while waiting for {}", got, id));
    }
    RpcReply reply = parse_rpc_reply(msg);  // rpc-error -> DenyError; the session stays usable
    stamp_acked();
    return reply;
  }
}

SwitchInfo NetconfDriver::do_info() {
  auto reply = rpc("get product-information",
                   build_get(fmt::format("<product-information xmlns=\"{}\"/>", kOpticalSwitchNs)));
  ProductInformation pi = parse_product_information(reply.data);
  SwitchInfo info;
  info.vendor = pi.manufacturer;
  info.model = pi.model;
  info.serial = pi.serial;
  info.version = pi.software_version;
  // The model has no size leaf; Polatis model names carry it ("...-48x48-..."), which is
  // how ONOS's Polatis driver reads it too. Fallback: the port list, assuming a
  // symmetric N x N switch numbered 1..2N (unverified for asymmetric models).
  auto size = switch_size_from_model(pi.model);
  if (!size) {
    auto ports_reply = rpc("get port-config",
                           build_get(fmt::format("<port-config xmlns=\"{}\"><port><port-id/></port></port-config>",
                                                 kOpticalSwitchNs)));
    auto ids = parse_port_config_ids(ports_reply.data);
    if (!ids.empty()) {
      int total = *std::max_element(ids.begin(), ids.end());
      if (total >= 2) size = std::pair{total / 2, total - total / 2};
    }
  }
  if (!size) {
    throw ProtocolError(fmt::format("cannot tell the switch size: model-name '{}' has no NxM and port-config "
                                    "lists no ports",
                                    pi.model));
  }
  info.ingress_ports = size->first;
  info.egress_ports = size->second;
  return info;
}

std::vector<Circuit> NetconfDriver::do_list() {
  auto reply = rpc("get cross-connects", build_get(fmt::format("<cross-connects xmlns=\"{}\"/>", kOpticalSwitchNs)));
  return parse_cross_connects(reply.data);
}

void NetconfDriver::edit_cross_connects(const std::vector<Circuit>& add, const std::vector<Port>& delete_ingress) {
  std::string command = fmt::format("edit-config cross-connects (merge {}, delete {})", add.size(), delete_ingress.size());
  auto reply = rpc(command, build_edit_config(build_cross_connects(add, delete_ingress, pair_name_)));
  if (!reply.ok) throw ProtocolError("edit-config reply has neither <ok/> nor <rpc-error>");
}

void NetconfDriver::do_connect(const std::vector<Circuit>& circuits) {
  // Merging a pair keyed by an already patched ingress just moves it to the new egress.
  // An egress patched from another ingress would be refused, so with replace_patched that
  // other pair is deleted in the same (atomic) edit-config.
  std::vector<Port> deletes;
  if (options().replace_patched) {
    std::set<Port> new_in, new_out;
    for (const auto& c : circuits) {
      new_in.insert(c.ingress);
      new_out.insert(c.egress);
    }
    set_op("list");
    for (const auto& c : do_list()) {
      if (new_out.count(c.egress) && !new_in.count(c.ingress)) {
        check_ports({c.ingress, c.egress}, true);  // the far end changes too: it must be ours
        deletes.push_back(c.ingress);
      }
    }
    set_op("connect");
  }
  edit_cross_connects(circuits, deletes);
}

void NetconfDriver::do_disconnect(const std::vector<Port>& ports) {
  // Pairs are keyed by ingress, and deleting one that does not exist is an error
  // (data-missing), so find the pairs first.
  std::set<Port> asked(ports.begin(), ports.end());
  std::vector<Port> deletes;
  set_op("list");
  for (const auto& c : do_list()) {
    if (asked.count(c.ingress) || asked.count(c.egress)) deletes.push_back(c.ingress);
  }
  set_op("disconnect");
  if (deletes.empty()) return;  // nothing patched on these ports
  edit_cross_connects({}, deletes);
}

namespace {
// A pair whose ingress is also re-added is merged with its new egress rather than deleted
// and created in the same request: NETCONF servers may refuse two operations on one list
// entry.
std::vector<Port> reconfigure_deletes(const MappingDiff& diff) {
  std::set<Port> readded;
  for (const auto& c : diff.add) readded.insert(c.ingress);
  std::vector<Port> deletes;
  for (const auto& c : diff.remove) {
    if (!readded.count(c.ingress)) deletes.push_back(c.ingress);
  }
  return deletes;
}
}  // namespace

std::vector<std::string> NetconfDriver::render_commands(const MappingDiff& diff) const {
  if (diff.empty()) return {};
  return {"<edit-config> (one rpc, target running): " +
          build_cross_connects(diff.add, reconfigure_deletes(diff), pair_name_)};
}

void NetconfDriver::do_reconfigure(const MappingDiff& diff) {
  set_op("reconfigure");
  edit_cross_connects(diff.add, reconfigure_deletes(diff));
}

std::vector<PortPower> NetconfDriver::do_power(const std::vector<Port>& ports) {
  if (ports.empty()) return {};
  auto reply = rpc("get opm-power " + ports_text(ports), build_get(build_opm_power_filter(ports)));
  std::map<Port, double> got;
  for (const auto& r : parse_opm_power(reply.data)) got[r.port] = r.dbm;
  std::vector<PortPower> out;
  for (Port p : ports) {
    auto it = got.find(p);
    if (it == got.end()) throw OcsError(fmt::format("the switch returned no opm-power reading for port {}", p));
    out.push_back({p, it->second});
  }
  return out;
}

}  // namespace ocslab::ocs
