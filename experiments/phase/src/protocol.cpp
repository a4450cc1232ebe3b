#include "ocslab/phase/protocol.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "wire_compact.h"

namespace ocslab::phase {

namespace {

struct TypeName {
  MsgType type;
  std::string_view name;
};
constexpr TypeName kTypes[] = {
    {MsgType::kHello, "hello"},
    {MsgType::kRegister, "register"},
    {MsgType::kRequest, "request"},
    {MsgType::kDone, "done"},
    {MsgType::kBye, "bye"},
    {MsgType::kWelcome, "welcome"},
    {MsgType::kRegistered, "registered"},
    {MsgType::kAck, "ack"},
    {MsgType::kFallback, "fallback"},
    {MsgType::kPeerLost, "peer_lost"},
    {MsgType::kMasked, "masked"},
    {MsgType::kError, "error"},
};

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& j, std::string_view where) : j_(j), where_(where) {}
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  [[noreturn]] void fail(const char* key, const char* what) const {
    throw ProtocolError(fmt::format("{}: field '{}' {}", where_, key, what));
  }
  [[noreturn]] void refuse(const std::string& text) const { throw ProtocolError(text); }
  std::string str(const char* key, bool required = true) const {
    auto v = find(key);
    if (!v) {
      if (required) fail(key, "is missing");
      return {};
    }
    if (!v->is_string()) fail(key, "must be a string");
    auto s = v->get<std::string>();
    if (required && s.empty()) fail(key, "must not be empty");
    return s;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi, bool required = true, int64_t dflt = -1) const {
    auto v = find(key);
    if (!v) {
      if (required) fail(key, "is missing");
      return dflt;
    }
    if (!v->is_number_integer()) fail(key, "must be an integer");
    auto x = v->get<int64_t>();
    if (x < lo || x > hi)
      throw ProtocolError(fmt::format("{}: field '{}' = {} is outside {}..{}", where_, key, x, lo, hi));
    return x;
  }
  bool boolean(const char* key) const {
    auto v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) fail(key, "must be true or false");
    return v->get<bool>();
  }
  std::vector<int> ints(const char* key) const {
    auto v = find(key);
    if (!v) fail(key, "is missing");
    if (!v->is_array()) fail(key, "must be a list of integers");
    std::vector<int> out;
    for (const auto& x : *v) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > (1 << 20)) {
        fail(key, "must be a list of integers 0..1048576");
      }
      out.push_back(x.get<int>());
    }
    return out;
  }
  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    auto v = find(key);
    if (!v) return out;
    if (!v->is_array()) fail(key, "must be a list of strings");
    for (const auto& x : *v) {
      if (!x.is_string()) fail(key, "must be a list of strings");
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  std::map<std::string, std::string> string_map(const char* key) const {
    std::map<std::string, std::string> out;
    auto v = find(key);
    if (!v) return out;
    if (!v->is_object()) fail(key, "must be an object of strings");
    for (const auto& [k, x] : v->items()) {
      if (!x.is_string()) fail(key, "must be an object of strings");
      out[k] = x.get<std::string>();
    }
    return out;
  }

 private:
  const json& j_;
  std::string_view where_;
};

constexpr int64_t kMaxSeq = int64_t{1} << 53;
constexpr int64_t kMaxPort = 1 << 20;  // a switch port number (kMasked)

// Each type's fields, from either reader.
template <class R>
void read_fields(const R& r, Message& m) {
  switch (m.type) {
    case MsgType::kHello:
      m.job = r.str("job");
      m.rank = static_cast<int>(r.integer("rank", 0, 1 << 20));
      m.world = static_cast<int>(r.integer("world", 1, 1 << 20));
      m.token = r.str("token", false);
      break;
    case MsgType::kRegister:
      m.group = r.str("group");
      m.dim = r.str("dim");
      m.ranks = r.ints("ranks");
      break;
    case MsgType::kRequest:
      m.group = r.str("group");
      m.seq = r.integer("seq", 0, kMaxSeq);
      m.op = r.integer("op", -1, kMaxSeq, false, -1);
      m.provision = r.boolean("provision");
      if (r.find("digit")) m.digit = static_cast<int>(r.integer("digit", 0, 9));
      m.run = r.integer("run", 0, kMaxRun, false, 0);
      break;
    case MsgType::kDone:
      m.group = r.str("group");
      m.seq = r.integer("seq", 0, kMaxSeq);
      break;
    case MsgType::kBye:
      break;
    case MsgType::kWelcome:
      m.job = r.str("job");
      m.rank = static_cast<int>(r.integer("rank", 0, 1 << 20));
      m.topo = r.string_map("topo");
      m.fallback = r.boolean("fallback");
      break;
    case MsgType::kRegistered:
      m.group = r.str("group");
      break;
    case MsgType::kAck:
      m.group = r.str("group");
      m.seq = r.integer("seq", 0, kMaxSeq);
      m.topo = r.string_map("topo");
      m.reconfigured = r.boolean("reconfigured");
      m.fallback = r.boolean("fallback");
      m.wait_us = r.integer("wait_us", 0, kMaxSeq, false, 0);
      m.keep = r.integer("keep", 0, kMaxRun, false, 0);
      break;
    case MsgType::kFallback:
      m.reason = r.str("reason");
      break;
    case MsgType::kPeerLost:
      m.rank = static_cast<int>(r.integer("rank", 0, 1 << 20));
      m.groups = r.strings("groups");
      m.reason = r.str("reason", false);
      break;
    case MsgType::kMasked:
      m.rail = r.str("rail");
      m.rank = static_cast<int>(r.integer("rank", 0, 1 << 20));
      m.port = static_cast<int>(r.integer("port", 1, kMaxPort));
      m.ingress = static_cast<int>(r.integer("ingress", 1, kMaxPort));
      m.egress = static_cast<int>(r.integer("egress", 1, kMaxPort));
      m.reason = r.str("reason", false);
      break;
    case MsgType::kError:
      m.message = r.str("message");
      m.group = r.str("group", false);
      m.seq = r.integer("seq", 0, kMaxSeq, false, -1);
      break;
  }
}

// The ACK's keys run past "type" and "v" (to "wait_us").
std::string encode_ack(const Message& m) {
  wire::CompactWriter w;
  w.boolean("fallback", m.fallback);
  w.str("group", m.group);
  if (m.keep > 0) w.integer("keep", m.keep);
  w.boolean("reconfigured", m.reconfigured);
  w.integer("seq", m.seq);
  w.string_map("topo", m.topo);
  w.str("type", "ack");
  w.integer("v", kProtocolVersion);
  w.integer("wait_us", m.wait_us);
  return std::move(w).done();
}

}  // namespace

std::string_view to_string(MsgType t) {
  for (const auto& x : kTypes) {
    if (x.type == t) return x.name;
  }
  return "?";
}

namespace wire {

std::string encode_json(const Message& m) {
  json j;
  j["v"] = kProtocolVersion;
  j["type"] = std::string(to_string(m.type));
  switch (m.type) {
    case MsgType::kHello:
      j["job"] = m.job;
      j["rank"] = m.rank;
      j["world"] = m.world;
      if (!m.token.empty()) j["token"] = m.token;
      break;
    case MsgType::kRegister:
      j["group"] = m.group;
      j["dim"] = m.dim;
      j["ranks"] = m.ranks;
      break;
    case MsgType::kRequest:
      j["group"] = m.group;
      j["seq"] = m.seq;
      j["op"] = m.op;
      j["provision"] = m.provision;
      if (m.digit) j["digit"] = *m.digit;
      if (m.run > 0) j["run"] = m.run;
      break;
    case MsgType::kDone:
      j["group"] = m.group;
      j["seq"] = m.seq;
      break;
    case MsgType::kBye:
      break;
    case MsgType::kWelcome:
      j["job"] = m.job;
      j["rank"] = m.rank;
      j["topo"] = m.topo;
      j["fallback"] = m.fallback;
      break;
    case MsgType::kRegistered:
      j["group"] = m.group;
      break;
    case MsgType::kAck:
      j["group"] = m.group;
      j["seq"] = m.seq;
      j["topo"] = m.topo;
      j["reconfigured"] = m.reconfigured;
      j["fallback"] = m.fallback;
      j["wait_us"] = m.wait_us;
      if (m.keep > 0) j["keep"] = m.keep;
      break;
    case MsgType::kFallback:
      j["reason"] = m.reason;
      break;
    case MsgType::kPeerLost:
      j["rank"] = m.rank;
      j["groups"] = m.groups;
      j["reason"] = m.reason;
      break;
    case MsgType::kMasked:
      j["rail"] = m.rail;
      j["rank"] = m.rank;
      j["port"] = m.port;
      j["ingress"] = m.ingress;
      j["egress"] = m.egress;
      j["reason"] = m.reason;
      break;
    case MsgType::kError:
      j["message"] = m.message;
      if (!m.group.empty()) j["group"] = m.group;
      if (m.seq >= 0) j["seq"] = m.seq;
      break;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace wire

// What encode_json writes, without a JSON document: each type's keys in nlohmann's (sorted) order.
std::string encode(const Message& m) {
  wire::CompactWriter w;
  const auto type = to_string(m.type);
  switch (m.type) {
    case MsgType::kHello:
      w.str("job", m.job);
      w.integer("rank", m.rank);
      if (!m.token.empty()) w.str("token", m.token);
      w.str("type", type);
      w.integer("v", kProtocolVersion);
      w.integer("world", m.world);
      return std::move(w).done();
    case MsgType::kRegister:
      w.str("dim", m.dim);
      w.str("group", m.group);
      w.ints("ranks", m.ranks);
      break;
    case MsgType::kRequest:
      if (m.digit) w.integer("digit", *m.digit);
      w.str("group", m.group);
      w.integer("op", m.op);
      w.boolean("provision", m.provision);
      if (m.run > 0) w.integer("run", m.run);
      w.integer("seq", m.seq);
      break;
    case MsgType::kDone:
      w.str("group", m.group);
      w.integer("seq", m.seq);
      break;
    case MsgType::kBye:
      break;
    case MsgType::kWelcome:
      w.boolean("fallback", m.fallback);
      w.str("job", m.job);
      w.integer("rank", m.rank);
      w.string_map("topo", m.topo);
      break;
    case MsgType::kRegistered:
      w.str("group", m.group);
      break;
    case MsgType::kAck:
      return encode_ack(m);
    case MsgType::kFallback:
      w.str("reason", m.reason);
      break;
    case MsgType::kPeerLost:
      w.strings("groups", m.groups);
      w.integer("rank", m.rank);
      w.str("reason", m.reason);
      break;
    case MsgType::kMasked:
      w.integer("egress", m.egress);
      w.integer("ingress", m.ingress);
      w.integer("port", m.port);
      w.str("rail", m.rail);
      w.integer("rank", m.rank);
      w.str("reason", m.reason);
      break;
    case MsgType::kError:
      if (!m.group.empty()) w.str("group", m.group);
      w.str("message", m.message);
      if (m.seq >= 0) w.integer("seq", m.seq);
      break;
  }
  w.str("type", type);
  w.integer("v", kProtocolVersion);
  return std::move(w).done();
}

namespace {

// The message a reader's document holds: the same checks, in the same order, whichever reader
// (nlohmann's, or the compact one of wire_compact.h) answers them.
template <class R>
Message read_message(const R& r, std::string_view where) {
  auto v = r.integer("v", 0, 1 << 30);
  if (v != kProtocolVersion) {
    r.refuse(fmt::format("{}: protocol version {} (this side speaks {})", where, v, kProtocolVersion));
  }
  auto type = r.str("type");
  Message m;
  bool known = false;
  for (const auto& x : kTypes) {
    if (x.name == type) {
      m.type = x.type;
      known = true;
    }
  }
  if (!known) r.refuse(fmt::format("{}: unknown message type '{}'", where, type));
  read_fields(r, m);
  return m;
}

}  // namespace

namespace wire {

Message decode_json(std::string_view line, std::string_view where) {
  if (line.size() > kMaxLine)
    throw ProtocolError(fmt::format("{}: line of {} bytes exceeds {}", where, line.size(), kMaxLine));
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ProtocolError(fmt::format("{}: not a JSON object", where));
  return read_message(Reader(j, where), where);
}

std::optional<Message> decode_compact(std::string_view line) {
  if (line.size() > kMaxLine) return std::nullopt;
  thread_local CompactDoc doc;  // keeps its item buffer from line to line
  if (!doc.parse(line)) return std::nullopt;
  try {
    return read_message(CompactReader(doc), {});
  } catch (const NotCompact&) {
    return std::nullopt;
  }
}

}  // namespace wire

Message decode(std::string_view line, std::string_view where) {
  if (auto m = wire::decode_compact(line)) return std::move(*m);
  return wire::decode_json(line, where);
}

}  // namespace ocslab::phase
