#include "ocslab/phase/controller_config.h"

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <tuple>

#include "ocslab/common/secret.h"

#include "ocslab/ocsctl/switch_url.h"

namespace ocslab::phase {

PortWatchOptions parse_detect_config(const YamlDoc& doc, const YAML::Node& d) {
  if (!d.IsMap()) throw config_error(doc, d, "detect is {interval_ms, threshold_dbm, dark_polls, settle_ms}");
  only_keys(doc, d, {"interval_ms", "threshold_dbm", "dark_polls", "settle_ms"});
  PortWatchOptions w;
  auto ranged = [&](const char* key, int64_t lo, int64_t hi, int64_t fallback) -> int64_t {
    auto n = d[key];
    if (!n) return fallback;
    auto v = as_int(doc, n);
    if (v < lo || v > hi) throw config_error(doc, n, fmt::format("detect.{} must be {}..{}", key, lo, hi));
    return v;
  };
  w.interval = std::chrono::milliseconds(ranged("interval_ms", 1, 60'000, w.interval.count()));
  w.dark_polls = static_cast<int>(ranged("dark_polls", 1, 100, w.dark_polls));
  w.settle = std::chrono::milliseconds(ranged("settle_ms", 0, 600'000, 0));
  if (auto t = d["threshold_dbm"]) {
    auto v = as_double(doc, t);
    if (!(v >= -100 && v <= 10)) throw config_error(doc, t, "detect.threshold_dbm must be -100..10");
    w.threshold_dbm = v;
  }
  return w;
}

PolicyConfig parse_policy_config(const YamlDoc& doc, const YAML::Node& root, bool windows_elsewhere) {
  PolicyConfig c;
  if (auto p = root["policy"]) {
    auto name = as_string(doc, p);
    auto policy = parse_policy(name);
    if (!policy) throw config_error(doc, p, fmt::format("policy '{}' is not one of {}", name, policy_names()));
    c.policy = *policy;
  }
  if (auto a = root["allocator"]) {
    auto name = as_string(doc, a);
    auto allocator = parse_allocator(name);
    if (!allocator) throw config_error(doc, a, fmt::format("allocator '{}' is not one of {}", name, allocator_names()));
    if (c.policy != Policy::kGreedy)
      throw config_error(doc, a,
                         fmt::format("allocator is for policy greedy, which allocates circuits (this job's policy is {})",
                                     to_string(c.policy)));
    c.allocator = *allocator;
  }
  auto table = root["phase_table"];
  auto st = root["switch_time_ms"];
  if (c.policy != Policy::kSafeWindow) {
    if (table || st) {
      throw config_error(doc, table ? table : st,
                         fmt::format("{} is for policy safe-window (this job's policy is {})",
                                     table ? "phase_table" : "switch_time_ms", to_string(c.policy)));
    }
    return c;
  }
  if (windows_elsewhere && table) {
    throw config_error(doc, table, "phase_table and safe_window_from: the windows come from one of them");
  }
  if (windows_elsewhere && st) {
    c.switch_time_ms = as_double(doc, st);
    if (!(c.switch_time_ms > 0 && c.switch_time_ms <= 3'600'000))
      throw config_error(doc, st, "switch_time_ms must be > 0 and at most 3600000");
    return c;
  }
  if (!table || !st) {
    throw config_error(doc, root["policy"],
                       fmt::format("policy safe-window needs {}: the predicted idle windows come from the phase table "
                                   "(index,group,type,bytes,idle_us) and are compared with the switch time",
                                   !table ? "phase_table" : "switch_time_ms"));
  }
  c.phase_table = as_string(doc, table);
  if (c.phase_table.empty()) throw config_error(doc, table, "phase_table must name a file");
  c.phase_table = beside_file(doc, c.phase_table);
  c.switch_time_ms = as_double(doc, st);
  if (!(c.switch_time_ms > 0 && c.switch_time_ms <= 3'600'000))
    throw config_error(doc, st, "switch_time_ms must be > 0 and at most 3600000");
  return c;
}

namespace {

// job, pp, dims and the initial topology.
void parse_layout(const YamlDoc& doc, const YAML::Node& root, ControllerConfig& c) {
  c.layout.job = as_string(doc, require(doc, root, "job"));
  auto pp = require(doc, root, "pp");
  c.layout.pp = static_cast<int>(as_int(doc, pp));
  if (auto dims = root["dims"]) {
    if (!dims.IsSequence()) throw config_error(doc, dims, "dims is a list of {name, size}");
    for (const auto& d : dims) {
      if (!d.IsMap()) throw config_error(doc, d, "a dimension is {name: NAME, size: N}");
      only_keys(doc, d, {"name", "size"});
      c.layout.dims.push_back(
          {as_string(doc, require(doc, d, "name")), static_cast<int>(as_int(doc, require(doc, d, "size")))});
    }
  }
  try {
    c.layout.validate();
  } catch (const TopologyError& e) {
    throw config_error(doc, pp, e.what());
  }
  if (auto init = root["initial"]) {
    try {
      c.initial = TopoId::parse(as_string(doc, init), c.layout);
    } catch (const TopologyError& e) {
      throw config_error(doc, init, e.what());
    }
  } else {
    c.initial = TopoId::uniform(c.layout, c.layout.dims.empty() ? 0 : 1);
  }
}

// token or token_file; neither only for a controller that listens on loopback.
void parse_token(const YamlDoc& doc, const YAML::Node& root, ControllerConfig& c) {
  if (root["token"] && root["token_file"])
    throw config_error(doc, root["token"], "token and token_file exclude each other: give one");
  if (auto t = root["token"]) {
    c.token = as_string(doc, t);
    if (c.token.size() < kMinTokenLength)
      throw config_error(doc, t, fmt::format("token must be at least {} characters", kMinTokenLength));
  }
  if (auto t = root["token_file"]) {
    c.token_file = as_string(doc, t);
    if (c.token_file.empty()) throw config_error(doc, t, "token_file must name a file");
    c.token_file = beside_file(doc, c.token_file);
  }
  if (c.token.empty() && c.token_file.empty()) {
    boost::system::error_code ec;
    auto addr = boost::asio::ip::make_address(c.listen_host, ec);
    if (ec || !addr.is_loopback()) {
      throw config_error(doc, root["listen"] ? root["listen"] : root,
                         fmt::format("listen {}: a controller reachable from other machines needs token_file: (or "
                                     "token:), which every shim must present",
                                     c.listen_host));
    }
  }
}

// A rail's slots: one INGRESS-EGRESS circuit per rank, no port twice, inside its allow-list.
void parse_slots(const YamlDoc& doc, const YAML::Node& slots, RailConfig& rc) {
  if (!slots.IsSequence()) throw config_error(doc, slots, "slots is a list of INGRESS-EGRESS, one per rank");
  std::set<int> ports;
  for (const auto& s : slots) {
    ocs::Circuit c2;
    try {
      c2 = ocs::parse_circuit(as_string(doc, s));
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw config_error(doc, s, e.what());
    }
    for (int p : {c2.ingress, c2.egress}) {
      if (!ports.insert(p).second)
        throw config_error(doc, s, fmt::format("port {} is in two slots of rail {}", p, rc.name));
      if (rc.allow && !rc.allow->contains(p)) {
        throw config_error(
            doc, s, fmt::format("port {} of rail {} is outside its allow-list {}", p, rc.name, rc.allow->to_string()));
      }
    }
    rc.slots.push_back({c2.ingress, c2.egress});
  }
}

RailConfig parse_rail(const YamlDoc& doc, const YAML::Node& r, const ControllerConfig& c,
                      std::set<std::string>& names) {
  if (!r.IsMap()) throw config_error(doc, r, "a rail is {name, switch, slots, [allow]}");
  only_keys(doc, r, {"name", "switch", "allow", "slots"});
  RailConfig rc;
  rc.name = as_string(doc, require(doc, r, "name"));
  if (!names.insert(rc.name).second)
    throw config_error(doc, r["name"], fmt::format("rail '{}' appears twice", rc.name));
  auto sw = require(doc, r, "switch");
  rc.url = as_string(doc, sw);
  try {
    (void)ocs::SwitchUrl::parse(rc.url);
  } catch (const Error& e) {
    throw config_error(doc, sw, e.what());
  }
  if (auto a = r["allow"]) {
    try {
      rc.allow = ocs::PortSet::parse(as_string(doc, a));
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw config_error(doc, a, e.what());
    }
  }
  auto slots = require(doc, r, "slots");
  parse_slots(doc, slots, rc);
  if (static_cast<int>(rc.slots.size()) < c.layout.ranks()) {
    throw config_error(doc, slots,
                       fmt::format("rail {} has {} slots but job {} has {} ranks", rc.name, rc.slots.size(),
                                   c.layout.job, c.layout.ranks()));
  }
  return rc;
}

}  // namespace

ControllerConfig parse_controller_config(const YamlDoc& doc) {
  const auto& root = doc.root;
  if (!root.IsMap()) throw config_error(doc, root, "a controller file is a mapping (job, pp, dims, rails, ...)");
  only_keys(doc, root,
            {"job", "pp", "dims", "initial", "listen", "token", "token_file", "ack_timeout_ms", "max_retries", "policy",
             "allocator", "phase_table", "switch_time_ms", "detect", "rails"});
  ControllerConfig c;
  c.origin = doc.origin;
  parse_layout(doc, root, c);
  if (auto l = root["listen"]) std::tie(c.listen_host, c.listen_port) = as_host_port(doc, l, "listen");
  parse_token(doc, root, c);
  if (auto t = root["ack_timeout_ms"]) {
    auto v = as_int(doc, t);
    if (v < 1 || v > 3'600'000) throw config_error(doc, t, "ack_timeout_ms must be 1..3600000");
    c.ack_timeout_ms = static_cast<int>(v);
  }
  if (auto m = root["max_retries"]) {
    auto v = as_int(doc, m);
    if (v < 0 || v > 100) throw config_error(doc, m, "max_retries must be 0..100");
    c.max_retries = static_cast<int>(v);
  }
  auto pc = parse_policy_config(doc, root);
  c.policy = pc.policy;
  c.allocator = pc.allocator;
  c.phase_table = pc.phase_table;
  c.switch_time_ms = pc.switch_time_ms;
  if (auto d = root["detect"]) c.detect = parse_detect_config(doc, d);
  auto rails = require(doc, root, "rails");
  if (!rails.IsSequence() || rails.size() == 0) throw config_error(doc, rails, "rails is a non-empty list");
  std::set<std::string> names;
  for (const auto& r : rails) c.rails.push_back(parse_rail(doc, r, c, names));
  return c;
}

namespace {

// A token written inline is as secret as a token file: the file that holds it must be this
// user's and closed to group and others, as read_secret_file() requires of a token_file.
void check_inline_token_file(const YamlDoc& doc, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw SystemError("controller config " + path + ": stat", errno);
  const bool others = (st.st_mode & 077) != 0, foreign = st.st_uid != ::geteuid();
  if (!others && !foreign) return;
  throw config_error(doc, doc.root["token"],
                     fmt::format("token: written inline, but {} {}; chmod 600 it (owned by you), or give token_file:",
                                 path,
                                 foreign ? fmt::format("is owned by uid {}, not by this user (uid {})", st.st_uid,
                                                       ::geteuid())
                                         : fmt::format("is mode {:04o}: group or others can read the token",
                                                       st.st_mode & 07777)));
}

}  // namespace

ControllerConfig load_controller_config(const std::string& path) {
  YamlDoc doc = load_yaml_file(path);
  auto c = parse_controller_config(doc);
  if (!c.token.empty()) check_inline_token_file(doc, path);
  if (c.policy == Policy::kSafeWindow) c.windows = PhaseWindows::load(c.phase_table);
  return c;
}

std::string controller_token(const ControllerConfig& c) {
  if (c.token_file.empty()) return c.token;
  auto t = read_secret_file(c.token_file, "controller token file");
  if (t.size() < kMinTokenLength)
    throw Error(fmt::format("controller token file {}: the token must be at least {} characters", c.token_file,
                            kMinTokenLength));
  return t;
}

}  // namespace ocslab::phase
