#include "ocslab/agent/protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>

namespace ocslab::agent {

using nlohmann::json;

namespace {

struct TypeName {
  RequestType type;
  const char* name;
};

constexpr TypeName kTypes[] = {
    {RequestType::kHello, "hello"},
    {RequestType::kClock, "clock"},
    {RequestType::kProbesStart, "probes.start"},
    {RequestType::kProbesStop, "probes.stop"},
    {RequestType::kStatus, "status"},
    {RequestType::kSpoolFetch, "spool.fetch"},
    {RequestType::kSpoolDelete, "spool.delete"},
    {RequestType::kBye, "bye"},
};

std::string known_types() {
  std::string s;
  for (const auto& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

// Every key of obj must be in keys; the first one that is not is named in the error.
void only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& where, const json& id) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* k : keys) known = known || it.key() == k;
    if (!known) {
      std::string list;
      for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      throw ProtocolError(fmt::format("unknown key '{}' in {} (known: {})", it.key(), where, list), id);
    }
  }
}

int64_t get_int(const json& obj, const char* key, const std::string& where, const json& id, int64_t lo, int64_t hi) {
  const json& v = obj.at(key);
  if (!v.is_number_integer()) throw ProtocolError(fmt::format("'{}' in {} must be an integer", key, where), id);
  // Unsigned values above INT64_MAX are out of range too, not wrapped.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw ProtocolError(fmt::format("'{}' in {} is out of range [{}, {}]", key, where, lo, hi), id);
  }
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw ProtocolError(fmt::format("'{}' in {} is {}, out of range [{}, {}]", key, where, x, lo, hi), id);
  }
  return x;
}

ProbeRequest parse_probe(const json& p, size_t index, const json& id) {
  std::string where = fmt::format("probes[{}]", index);
  if (!p.is_object()) throw ProtocolError(where + " must be an object", id);
  auto name = p.find("name");
  if (name == p.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    throw ProtocolError(where + " needs a non-empty string 'name'", id);
  }
  ProbeRequest r;
  r.name = name->get<std::string>();
  where += " (" + r.name + ")";
  if (auto ifs = p.find("interfaces"); ifs != p.end()) {
    if (!ifs->is_array()) throw ProtocolError("'interfaces' in " + where + " must be an array of strings", id);
    for (const auto& i : *ifs) {
      if (!i.is_string() || i.get_ref<const std::string&>().empty()) {
        throw ProtocolError("'interfaces' in " + where + " must hold non-empty strings", id);
      }
      r.interfaces.push_back(i.get<std::string>());
    }
  }
  if (p.contains("interval_ms")) r.interval_ms = static_cast<int>(get_int(p, "interval_ms", where, id, 1, 3600000));
  r.params = p;
  return r;
}

// Writes a JSON string literal (quotes and escapes) for s.
// A JSON string exactly as nlohmann::json's dump writes it (ensure_ascii off, invalid UTF-8
// replaced). Printable ASCII without '"' or '\\', which is what probes name things with, is
// copied as it is; anything else goes through the library. Every sample has five strings, and
// building a json value per string was most of the agent's formatting cost.
void append_string(std::string& out, const std::string& s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
  if (!plain) {
    out += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

void append_integer(std::string& out, auto v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

}  // namespace

void check_name(const std::string& value, const char* what, size_t max_bytes, const json& id) {
  if (value.empty() || value.size() > max_bytes) {
    throw ProtocolError(fmt::format("{} must be 1 to {} characters, got {}", what, max_bytes, value.size()), id);
  }
  if (value[0] == '.') throw ProtocolError(fmt::format("{} '{}' must not start with '.'", what, value), id);
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '.' || c == '_' || c == '-') || u >= 0x80) {
      std::string shown = u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
      throw ProtocolError(fmt::format("{} '{}' has '{}': only A-Z a-z 0-9 . _ - are allowed", what,
                                      value.size() <= 40 ? value : value.substr(0, 40) + "...", shown),
                          id);
    }
  }
}

const char* to_string(RequestType t) {
  for (const auto& x : kTypes) {
    if (x.type == t) return x.name;
  }
  return "?";
}

Request parse_request(std::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded()) {
    std::string head(line.substr(0, 60));
    for (char& c : head) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    throw ProtocolError(fmt::format("not JSON: '{}'{}", head, line.size() > 60 ? "..." : ""));
  }
  if (!j.is_object()) throw ProtocolError("a request must be a JSON object");
  json id;
  if (auto it = j.find("id"); it != j.end()) {
    if (it->is_number_integer() || it->is_string()) id = *it;
  }
  auto type_it = j.find("type");
  if (type_it == j.end() || !type_it->is_string()) throw ProtocolError("a request needs a string 'type'", id);
  const std::string& type = type_it->get_ref<const std::string&>();
  if (!j.contains("id")) throw ProtocolError("request '" + type + "' needs an 'id'", id);
  if (id.is_null()) throw ProtocolError("'id' must be an integer or a string", id);

  Request r;
  r.id = id;
  bool found = false;
  for (const auto& t : kTypes) {
    if (type == t.name) {
      r.type = t.type;
      found = true;
    }
  }
  if (!found) throw ProtocolError(fmt::format("unknown request type '{}' (known: {})", type, known_types()), id);

  switch (r.type) {
    case RequestType::kHello:
      only_keys(j, {"type", "id", "version"}, "hello", id);
      if (!j.contains("version")) throw ProtocolError("hello needs 'version'", id);
      r.version = static_cast<int>(get_int(j, "version", "hello", id, 0, 1000000));
      break;
    case RequestType::kClock:
      only_keys(j, {"type", "id", "t1"}, "clock", id);
      if (!j.contains("t1")) throw ProtocolError("clock needs 't1' (CLOCK_REALTIME ns at send)", id);
      r.t1 = get_int(j, "t1", "clock", id, 0, std::numeric_limits<int64_t>::max());
      break;
    case RequestType::kProbesStart: {
      only_keys(j, {"type", "id", "probes", "run"}, "probes.start", id);
      if (auto run = j.find("run"); run != j.end()) {
        if (!run->is_string()) throw ProtocolError("'run' in probes.start must be a string", id);
        r.run = run->get<std::string>();
        check_name(r.run, "'run' in probes.start", kMaxRunBytes, id);
      }
      auto p = j.find("probes");
      if (p == j.end() || !p->is_array() || p->empty()) {
        throw ProtocolError("probes.start needs a non-empty array 'probes'", id);
      }
      for (size_t i = 0; i < p->size(); ++i) {
        r.probes.push_back(parse_probe((*p)[i], i, id));
        for (size_t k = 0; k < i; ++k) {
          // The same probe may run several times with distinct params.label (e.g. one RDMA
          // queue pair per peer); the label tells their samples apart.
          if (r.probes[k].name == r.probes[i].name &&
              r.probes[k].params.value("label", "") == r.probes[i].params.value("label", "")) {
            throw ProtocolError(fmt::format("probe '{}' named twice in probes.start (give each a distinct 'label')",
                                            r.probes[i].name),
                                id);
          }
        }
      }
      break;
    }
    case RequestType::kSpoolFetch:
      only_keys(j, {"type", "id", "from_seq", "follow", "max_count"}, "spool.fetch", id);
      if (!j.contains("from_seq")) throw ProtocolError("spool.fetch needs 'from_seq'", id);
      r.from_seq =
          static_cast<uint64_t>(get_int(j, "from_seq", "spool.fetch", id, 1, std::numeric_limits<int64_t>::max()));
      if (auto f = j.find("follow"); f != j.end()) {
        if (!f->is_boolean()) throw ProtocolError("'follow' in spool.fetch must be true or false", id);
        r.follow = f->get<bool>();
      }
      if (j.contains("max_count")) {
        r.max_count =
            static_cast<uint64_t>(get_int(j, "max_count", "spool.fetch", id, 1, static_cast<int64_t>(kMaxFetchPage)));
      }
      break;
    case RequestType::kSpoolDelete: {
      only_keys(j, {"type", "id", "capture"}, "spool.delete", id);
      auto c = j.find("capture");
      if (c == j.end() || !c->is_string()) throw ProtocolError("spool.delete needs a string 'capture'", id);
      r.capture = c->get<std::string>();
      check_name(r.capture, "'capture' in spool.delete", kMaxCaptureBytes, id);
      break;
    }
    case RequestType::kProbesStop:
    case RequestType::kStatus:
    case RequestType::kBye:
      only_keys(j, {"type", "id"}, type, id);
      break;
  }
  return r;
}

json probe_request_json(const ProbeRequest& p) {
  json j = p.params.is_object() ? p.params : json::object();
  j["name"] = p.name;
  j["interfaces"] = p.interfaces;
  j["interval_ms"] = p.interval_ms;
  return j;
}

std::string request_line(const Request& r) {
  json j = {{"type", to_string(r.type)}, {"id", r.id}};
  switch (r.type) {
    case RequestType::kHello:
      j["version"] = r.version;
      break;
    case RequestType::kClock:
      j["t1"] = r.t1;
      break;
    case RequestType::kProbesStart: {
      json a = json::array();
      for (const auto& p : r.probes) a.push_back(probe_request_json(p));
      j["probes"] = std::move(a);
      if (!r.run.empty()) j["run"] = r.run;
      break;
    }
    case RequestType::kSpoolDelete:
      j["capture"] = r.capture;
      break;
    case RequestType::kSpoolFetch:
      j["from_seq"] = r.from_seq;
      j["follow"] = r.follow;
      if (r.max_count > 0) j["max_count"] = r.max_count;
      break;
    default:
      break;
  }
  return to_line(j);
}

std::string sample_line(uint64_t seq, const Sample& s) {
  std::string out;
  append_sample_line(out, seq, s);
  return out;
}

void append_sample_line(std::string& out, uint64_t seq, const Sample& s) {
  out += "{\"type\":\"sample\",\"seq\":";
  append_integer(out, seq);
  out += ",\"t_ns\":";
  append_integer(out, s.t_ns);
  out += ",\"mono_ns\":";
  append_integer(out, s.mono_ns);
  out += ",\"host\":";
  append_string(out, s.host);
  out += ",\"source\":";
  append_string(out, s.source);
  out += ",\"subject\":";
  append_string(out, s.subject);
  out += ",\"signal\":";
  append_string(out, s.signal);
  out += ",\"value\":";
  // fmt's shortest round-trip form is valid JSON for finite values; JSON has no NaN.
  if (std::isfinite(s.value)) {
    fmt::format_to(std::back_inserter(out), "{}", s.value);
  } else {
    out += "null";
  }
  out += ",\"unit\":";
  append_string(out, s.unit);
  out += "}\n";
}

std::optional<uint64_t> sample_line_seq(std::string_view line) {
  constexpr std::string_view kPrefix = "{\"type\":\"sample\",\"seq\":";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  uint64_t seq = 0;
  auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), seq);
  if (ec != std::errc() || p == line.data() || p == line.data() + line.size() || *p != ',') return std::nullopt;
  return seq;
}

SeqSample parse_sample(const json& j) {
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) throw ProtocolError(fmt::format("sample needs a string '{}'", key));
    return it->get<std::string>();
  };
  auto integer = [&](const char* key) -> json {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer())
      throw ProtocolError(fmt::format("sample needs an integer '{}'", key));
    return *it;
  };
  if (!j.is_object()) throw ProtocolError("a sample must be a JSON object");
  SeqSample out;
  json seq = integer("seq");
  if (!seq.is_number_unsigned() || seq.get<uint64_t>() == 0) throw ProtocolError("sample 'seq' must be >= 1");
  out.seq = seq.get<uint64_t>();
  out.sample.t_ns = integer("t_ns").get<int64_t>();
  out.sample.mono_ns = integer("mono_ns").get<int64_t>();
  out.sample.host = str("host");
  out.sample.source = str("source");
  out.sample.subject = str("subject");
  out.sample.signal = str("signal");
  out.sample.unit = str("unit");
  auto v = j.find("value");
  if (v == j.end() || !(v->is_number() || v->is_null())) throw ProtocolError("sample needs a number 'value'");
  out.sample.value = v->is_null() ? std::numeric_limits<double>::quiet_NaN() : v->get<double>();
  return out;
}

json parse_message(std::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw ProtocolError(fmt::format("agent sent something that is not a JSON object: '{}'", line.substr(0, 120)));
  }
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) {
    throw ProtocolError(fmt::format("agent sent a message without a string 'type': '{}'", line.substr(0, 120)));
  }
  return j;
}

json ok_reply(RequestType type, const json& id) { return {{"type", to_string(type)}, {"id", id}, {"ok", true}}; }

json error_reply(const json& id, const std::string& message) {
  return {{"type", "error"}, {"id", id}, {"ok", false}, {"message", message}};
}

std::string to_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

void LineReader::feed(std::string_view bytes) { buf_.append(bytes); }

std::optional<LineReader::Line> LineReader::next() {
  for (;;) {
    if (report_too_long_) {
      report_too_long_ = false;
      return Line{{}, true};
    }
    size_t nl = buf_.find('\n', scan_);
    if (nl == std::string::npos) {
      if (skipping_) {
        buf_.clear();
        scan_ = 0;
      } else if (buf_.size() > max_) {
        // Over-long and still no newline: drop what we have, keep dropping to the newline.
        buf_.clear();
        scan_ = 0;
        skipping_ = true;
        report_too_long_ = true;
        continue;
      } else {
        scan_ = buf_.size();
      }
      return std::nullopt;
    }
    std::string text = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    scan_ = 0;
    if (skipping_) {
      skipping_ = false;
      continue;
    }
    if (text.size() > max_) return Line{{}, true};
    if (!text.empty() && text.back() == '\r') text.pop_back();
    return Line{std::move(text), false};
  }
}

}  // namespace ocslab::agent
