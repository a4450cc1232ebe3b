#include "ocslab/phase/controller_core.h"

#include <fmt/format.h>

#include <algorithm>

#include "ocslab/common/clock.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/common/log.h"
#include "ocslab/common/secret.h"

namespace ocslab::phase {

using Kind = ControllerEvent::Kind;

std::string_view to_string(ControllerEvent::Kind k) {
  switch (k) {
    case Kind::kRequest:
      return "request";
    case Kind::kAck:
      return "ack";
    case Kind::kDone:
      return "done";
    case Kind::kReconfigStart:
      return "reconfig_start";
    case Kind::kReconfigEnd:
      return "reconfig_end";
    case Kind::kTimeout:
      return "timeout";
    case Kind::kRetry:
      return "retry";
    case Kind::kFallback:
      return "fallback";
    case Kind::kRingReady:
      return "ring_ready";
    case Kind::kDisconnect:
      return "disconnect";
    case Kind::kRejected:
      return "rejected";
    case Kind::kDeclined:
      return "declined";
    case Kind::kPortFailed:
      return "port_failed";
    case Kind::kMasked:
      return "masked";
  }
  return "?";
}

void write_events_csv(const std::string& path, const std::vector<ControllerEvent>& events) {
  CsvWriter w(path);
  w.header({"mono_ns", "t_ns", "kind", "rank", "rail", "group", "seq", "stages", "value", "detail"});
  for (const auto& e : events) {
    std::string st;
    for (int s : e.stages) st += (st.empty() ? "" : " ") + std::to_string(s);
    w.row({std::to_string(e.mono_ns), std::to_string(e.real_ns), std::string(to_string(e.kind)), std::to_string(e.rank),
           e.rail, e.group, std::to_string(e.seq), st, fmt::format("{}", e.value), e.detail});
  }
  w.flush();
}

namespace {

ControllerEvent event(ControllerEvent::Kind k) {
  ControllerEvent e;
  e.kind = k;
  return e;
}

// The layout after its own check (TopologyError naming the bad field), for the table built from it.
const JobLayout& validated(const JobLayout& layout) {
  layout.validate();
  return layout;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

ControllerCore::ControllerCore(CoreConfig config, CoreActions& actions)
    : cfg_(std::move(config)), act_(actions), table_(validated(cfg_.layout)) {
  if (cfg_.rails.empty()) throw Error(fmt::format("controller {}: no rails", cfg_.layout.job));
  if (cfg_.initial.size() != cfg_.rails.size())
    throw Error(fmt::format("controller {}: {} rails but {} initial topologies", cfg_.layout.job, cfg_.rails.size(),
                            cfg_.initial.size()));
  if (cfg_.policy == Policy::kSafeWindow) {
    if (cfg_.windows.ops.empty())
      throw Error(
          fmt::format("controller {}: policy safe-window needs a phase table with idle windows", cfg_.layout.job));
    if (cfg_.switch_time.count() <= 0)
      throw Error(fmt::format("controller {}: policy safe-window needs the switch time (> 0)", cfg_.layout.job));
  }
  current_ = cfg_.initial;
  intended_ = current_;
  confirmed_.assign(cfg_.rails.size(), 0);
  version_.assign(cfg_.rails.size(), 0);
  inflight_.assign(static_cast<size_t>(cfg_.layout.pp), 0);
  busy_.assign(static_cast<size_t>(cfg_.layout.pp), false);
}

void ControllerCore::record(ControllerEvent e) {
  auto t = now();
  e.mono_ns = t.monotonic_ns;
  e.real_ns = t.realtime_ns;
  if (cfg_.on_event) cfg_.on_event(e);
  std::lock_guard lock(events_mu_);
  events_.push_back(std::move(e));
}

void ControllerCore::problem(std::string text) {
  spdlog::warn("controller {}: {}", cfg_.layout.job, text);
  std::lock_guard lock(events_mu_);
  problems_.push_back(std::move(text));
}

std::vector<ControllerEvent> ControllerCore::events() const {
  std::lock_guard lock(events_mu_);
  return events_;
}

std::vector<std::string> ControllerCore::problems() const {
  std::lock_guard lock(events_mu_);
  return problems_;
}

std::pair<TopoId, uint64_t> ControllerCore::intended(size_t rail) const {
  std::lock_guard lock(intended_mu_);
  return {intended_.at(rail), version_.at(rail)};
}

void ControllerCore::opened(ConnId c, std::string peer) { conns_[c].peer = std::move(peer); }

void ControllerCore::cancel_timers() {
  for (auto& [id, r] : active_) {
    for (size_t k = 0; k < cfg_.rails.size(); ++k) {
      if (!r.done[k]) act_.cancel_timer(id, k);
    }
  }
}

bool ControllerCore::joined(ConnId c) const {
  auto it = conns_.find(c);
  return it != conns_.end() && it->second.rank >= 0;
}

void ControllerCore::reject(ConnId c, const std::string& text, bool close, const std::string& group, int64_t seq) {
  if (conns_.at(c).rank < 0 && ++refused_strangers_ > kRecordedRefusals) {
    if (refused_strangers_ == kRecordedRefusals + 1)
      problem(fmt::format("more than {} clients refused before joining; further refusals are not recorded",
                          kRecordedRefusals));
    Message m;
    m.type = MsgType::kError;
    m.message = text;
    act_.send(c, m);
    act_.close_after_send(c);
    return;
  }
  auto e = event(Kind::kRejected);
  e.rank = conns_.at(c).rank;
  e.group = group;
  e.seq = seq;
  e.detail = text;
  record(e);
  problem(text);
  Message m;
  m.type = MsgType::kError;
  m.message = text;
  m.group = group;
  m.seq = seq;
  act_.send(c, m);
  if (close) act_.close_after_send(c);
}

void ControllerCore::on_line(ConnId c, std::string_view line) {
  if (line.empty()) return;
  Message m;
  if (auto quick = wire::decode_compact(line)) {  // the usual line: no JSON document, no `where` text
    m = std::move(*quick);
  } else {
    try {
      const Conn& conn = conns_.at(c);
      m = wire::decode_json(line,
                            conn.rank >= 0 ? fmt::format("rank {}", conn.rank) : fmt::format("client {}", conn.peer));
    } catch (const ProtocolError& e) {
      reject(c, e.what(), true);
      return;
    }
  }
  if (m.type != MsgType::kHello && conns_.at(c).rank < 0) {
    reject(c, fmt::format("client {}: '{}' before hello", conns_.at(c).peer, to_string(m.type)), true);
    return;
  }
  switch (m.type) {
    case MsgType::kHello:
      hello(c, m);
      break;
    case MsgType::kRegister:
      do_register(c, m);
      break;
    case MsgType::kRequest:
      request(c, m);
      break;
    case MsgType::kDone:
      done_msg(c, m);
      break;
    case MsgType::kBye:
      conns_.at(c).bye = true;
      act_.close(c);
      break;
    default:
      reject(c, fmt::format("rank {}: '{}' is a controller message", conns_.at(c).rank, to_string(m.type)), true);
  }
}

void ControllerCore::hello(ConnId c, const Message& m) {
  const auto& L = cfg_.layout;
  if (conns_.at(c).rank >= 0) return reject(c, fmt::format("rank {}: second hello", conns_.at(c).rank), true);
  // Before anything the hello claims is looked at: a client without the token learns nothing
  // about the job and changes nothing.
  if (!cfg_.token.empty() && !constant_time_equal(m.token, cfg_.token)) {
    return reject(c,
                  fmt::format("client {}: hello {}; refused", conns_.at(c).peer,
                              m.token.empty() ? "without the controller's token" : "with a wrong token"),
                  true);
  }
  if (m.job != L.job) {
    return reject(c, fmt::format("rank {}: hello for job '{}' but this controller runs job '{}'", m.rank, m.job, L.job),
                  true);
  }
  if (m.world != L.ranks()) {
    return reject(c,
                  fmt::format("rank {}: joined with world size {} but job {} has {} ranks (pp={}, {} per stage)",
                              m.rank, m.world, L.job, L.ranks(), L.pp, L.ranks_per_stage()),
                  true);
  }
  if (m.rank >= L.ranks())
    return reject(c, fmt::format("rank {}: job {} has ranks 0..{}", m.rank, L.job, L.ranks() - 1), true);
  if (rank_conn_.count(m.rank)) return reject(c, fmt::format("rank {}: already connected", m.rank), true);
  conns_.at(c).rank = m.rank;
  rank_conn_[m.rank] = c;
  lost_.erase(m.rank);
  Message w;
  w.type = MsgType::kWelcome;
  w.job = L.job;
  w.rank = m.rank;
  w.topo = topo_map();
  w.fallback = fallback_ != Fallback::kNo;
  act_.send(c, w);
}

void ControllerCore::do_register(ConnId c, const Message& m) {
  const auto& L = cfg_.layout;
  const int r = conns_.at(c).rank;
  Group g;
  g.dim = m.dim;
  if (m.dim == "mgmt") {
    g.digit = -1;
  } else {
    try {
      g.digit = L.digit_of(m.dim);
    } catch (const TopologyError& e) {
      return reject(c, fmt::format("rank {} group {}: {}", r, m.group, e.what()), false, m.group);
    }
  }
  g.ranks = m.ranks;
  std::sort(g.ranks.begin(), g.ranks.end());
  if (g.ranks.empty() || std::adjacent_find(g.ranks.begin(), g.ranks.end()) != g.ranks.end()) {
    return reject(
        c,
        fmt::format("rank {} group {}: ranks [{}] must be a non-empty list without repeats", r, m.group, join(m.ranks)),
        false, m.group);
  }
  if (g.ranks.back() >= L.ranks()) {
    return reject(c,
                  fmt::format("rank {} group {}: rank {} is outside job {} (0..{})", r, m.group, g.ranks.back(), L.job,
                              L.ranks() - 1),
                  false, m.group);
  }
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) {
    return reject(c, fmt::format("rank {} registers group {} without being in it ([{}])", r, m.group, join(g.ranks)),
                  false, m.group);
  }
  // A disagreement with what another rank registered is the more useful message: check it first.
  auto it = groups_.find(m.group);
  if (it != groups_.end()) {
    const auto& old = it->second;
    if (old.ranks.size() != g.ranks.size() || old.ranks != g.ranks || old.dim != g.dim) {
      return reject(
          c,
          fmt::format("rank {} group {}: says size {} ({}, ranks [{}]) but rank {} registered size {} ({}, ranks [{}])",
                      r, m.group, g.ranks.size(), g.dim, join(g.ranks), old.registered_by, old.ranks.size(), old.dim,
                      join(old.ranks)),
          false, m.group);
    }
  }
  std::set<int> st;
  for (int x : g.ranks) st.insert(L.stage_of(x));
  g.stages.assign(st.begin(), st.end());
  if (g.digit > 0 && g.stages.size() > 1) {
    return reject(c,
                  fmt::format("rank {} group {}: a {} group lives in one pipeline stage, these ranks span stages {}", r,
                              m.group, m.dim, join(g.stages)),
                  false, m.group);
  }
  if (it == groups_.end()) {
    g.registered_by = r;
    groups_[m.group] = g;
  }
  Message ok;
  ok.type = MsgType::kRegistered;
  ok.group = m.group;
  act_.send(c, ok);
}

void ControllerCore::request(ConnId c, const Message& m) {
  const int r = conns_.at(c).rank;
  auto git = groups_.find(m.group);
  if (git == groups_.end())
    return reject(c, fmt::format("rank {}: unknown group '{}'", r, m.group), false, m.group, m.seq);
  const auto& g = git->second;
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) {
    return reject(c, fmt::format("rank {}: not a member of group {}", r, m.group), false, m.group, m.seq);
  }
  int digit = g.digit;
  if (m.digit && g.digit < 0) {
    return reject(
        c,
        fmt::format("rank {} group {}: a management group never reconfigures (digit {} given)", r, m.group, *m.digit),
        false, m.group, m.seq);
  }
  if (m.digit) {
    if (*m.digit > static_cast<int>(cfg_.layout.dims.size())) {
      return reject(c,
                    fmt::format("rank {} group {}: topo digit {} names a dimension job {} lacks ({})", r, m.group,
                                *m.digit, cfg_.layout.job, cfg_.layout.describe_digits()),
                    false, m.group, m.seq);
    }
    digit = *m.digit;
  }
  // Scanned only once a rank was lost: the group may hold every rank of the job.
  for (size_t i = 0; !lost_.empty() && i < g.ranks.size(); ++i) {
    const int x = g.ranks[i];
    if (lost_.count(x)) {
      return reject(c, fmt::format("rank {} group {}: rank {} of the group is disconnected", r, m.group, x), false,
                    m.group, m.seq);
    }
  }
  auto e = event(Kind::kRequest);
  e.rank = r;
  e.group = m.group;
  e.seq = m.seq;
  e.stages = g.stages;
  e.value = m.provision;
  record(e);
  auto key = std::make_pair(m.group, m.seq);
  auto& b = barriers_[key];
  if (b.ready.empty()) {
    b.digit = digit;
    b.op = m.op;
  } else if (b.digit != digit) {
    return reject(c,
                  fmt::format("rank {} group {} seq {}: asks for digit {} but the group's other ranks asked for {}", r,
                              m.group, m.seq, digit, b.digit),
                  false, m.group, m.seq);
  }
  if (b.ready.count(r))
    return reject(c, fmt::format("rank {} group {}: seq {} requested twice", r, m.group, m.seq), false, m.group, m.seq);
  if (rank_ops_[r].count(key)) {
    return reject(c,
                  fmt::format("rank {} group {}: seq {} was already granted (an earlier ACK's keep); it runs without "
                              "a request",
                              r, m.group, m.seq),
                  false, m.group, m.seq);
  }
  b.ready[r] = monotonic_ns();
  // A run declared with a digit override is not granted: the following ops may want another digit.
  const int64_t run = m.digit ? 0 : m.run;
  b.run = b.run < 0 ? run : std::min(b.run, run);
  if (b.ready.size() < g.ranks.size()) return;
  // Only a symmetric group's run is granted (a stage's ring along one dimension, which no other
  // stage's change disturbs); pipeline groups ask for every op.
  Pending p{m.group, m.seq, b.digit, std::move(b.ready), g.digit > 0 ? std::max<int64_t>(b.run, 0) : 0};
  barriers_.erase(key);
  if (g.digit < 0) {
    ack_all(p, false);  // management: every rank asked, nothing to change
    return;
  }
  queue_.push_back(std::move(p));
  pump();
}

void ControllerCore::done_msg(ConnId c, const Message& m) {
  auto& ops = rank_ops_[conns_.at(c).rank];
  auto it = ops.find({m.group, m.seq});
  if (it == ops.end()) {
    return reject(
        c, fmt::format("rank {} group {}: done for seq {} that was never ACKed", conns_.at(c).rank, m.group, m.seq),
        false, m.group, m.seq);
  }
  ops.erase(it);
  const auto& g = groups_.at(m.group);
  if (g.digit >= 0) {
    for (int st : g.stages) --inflight_[static_cast<size_t>(st)];
  }
  auto e = event(Kind::kDone);
  e.rank = conns_.at(c).rank;
  e.group = m.group;
  e.seq = m.seq;
  e.stages = g.stages;
  record(e);
  pump();
}

void ControllerCore::ack_all(const Pending& p, bool reconfigured, bool declined) {
  const auto& g = groups_.at(p.group);
  // A declined op runs over the circuits as they are (or the fallback ring): its ACK says
  // fallback, for this op only; nothing is granted with it.
  const bool fb = fallback_ != Fallback::kNo || declined;
  // A granted run: the group's next `keep` ops count as ACKed now, on the same topology. Each
  // stays in flight (G2 holds the group's stages) until that op's done. Not in fallback.
  const int64_t keep = fb || g.digit <= 0 ? 0 : p.keep;
  auto topo = topo_map();
  int64_t t = monotonic_ns();
  for (int r : g.ranks) {
    auto it = rank_conn_.find(r);
    if (it == rank_conn_.end()) continue;  // lost meanwhile: reported already
    for (int64_t k = 0; k <= keep; ++k) {
      rank_ops_[r].insert({p.group, p.seq + k});  // management ops too, so their done is accepted
      if (g.digit >= 0) {
        for (int st : g.stages) ++inflight_[static_cast<size_t>(st)];
      }
      if (k == 0) continue;
      auto e = event(Kind::kAck);
      e.rank = r;
      e.group = p.group;
      e.seq = p.seq + k;
      e.stages = g.stages;
      e.value = 0;
      e.detail = fmt::format("granted with seq {}", p.seq);
      record(e);
    }
    Message a;
    a.type = MsgType::kAck;
    a.group = p.group;
    a.seq = p.seq;
    a.topo = topo;
    a.reconfigured = reconfigured;
    a.fallback = fb;
    a.keep = keep;
    auto rt = p.ready.find(r);
    a.wait_us = rt == p.ready.end() ? 0 : (t - rt->second) / 1000;
    auto e = event(Kind::kAck);
    e.rank = r;
    e.group = p.group;
    e.seq = p.seq;
    e.stages = g.digit >= 0 ? g.stages : std::vector<int>{};
    e.value = reconfigured;
    if (declined) e.detail = "declined: runs over the circuits as they are";
    record(e);
    act_.send(it->second, a);
  }
}

void ControllerCore::pump() {
  if (fallback_ == Fallback::kDraining) {
    bool idle = true;
    for (int n : inflight_) idle = idle && n == 0;
    if (idle) apply_ring();
  }
  std::set<int> blocked;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const auto& g = groups_.at(it->group);
    bool wait = fallback_ == Fallback::kDraining || fallback_ == Fallback::kApplying;
    for (int st : g.stages) wait = wait || busy_[static_cast<size_t>(st)] || blocked.count(st);
    if (wait) {
      blocked.insert(g.stages.begin(), g.stages.end());
      ++it;
      continue;
    }
    if (fallback_ == Fallback::kActive) {
      ack_all(*it, false);
      it = queue_.erase(it);
      continue;
    }
    std::vector<TopoId> next = intended_;
    std::set<int> touched;
    for (size_t k = 0; k < next.size(); ++k) {
      for (int st : g.stages) next[k].set(st, it->digit);
      for (int st : table_.touched_stages(intended_[k], next[k])) touched.insert(st);
    }
    if (touched.empty()) {  // the fabric already has it: ACK without changing anything
      ack_all(*it, false);
      it = queue_.erase(it);
      continue;
    }
    if (decline(*it)) {  // safe-window: the window is too short, keep the circuits
      it = queue_.erase(it);
      continue;
    }
    bool hold = false;
    for (int st : touched)
      hold = hold || busy_[static_cast<size_t>(st)] || inflight_[static_cast<size_t>(st)] > 0 || blocked.count(st);
    if (hold) {  // G2: an op is in flight on a stage this change disturbs
      blocked.insert(g.stages.begin(), g.stages.end());
      blocked.insert(touched.begin(), touched.end());
      ++it;
      continue;
    }
    Pending p = std::move(*it);
    it = queue_.erase(it);
    start_reconfig(std::move(p), next, {touched.begin(), touched.end()});
  }
}

bool ControllerCore::decline(const Pending& p) {
  if (cfg_.policy != Policy::kSafeWindow) return false;
  auto d = decide_safe_window(cfg_.windows, p.group, p.seq, cfg_.switch_time);
  if (d.reconfigure) return false;
  ++declined_;
  auto e = event(Kind::kDeclined);
  e.group = p.group;
  e.seq = p.seq;
  e.stages = groups_.at(p.group).stages;
  e.value = static_cast<double>(d.idle_us);
  e.detail = d.why;
  record(e);
  ack_all(p, false, true);
  return true;
}

void ControllerCore::start_reconfig(Pending p, const std::vector<TopoId>& next, const std::vector<int>& stages) {
  Reconfig r;
  r.id = ++next_id_;
  r.p = std::move(p);
  r.stages = stages;
  const size_t n = cfg_.rails.size();
  r.need.assign(n, 0);
  r.done.assign(n, true);
  r.attempts.assign(n, 0);
  for (int st : stages) busy_[static_cast<size_t>(st)] = true;
  std::vector<size_t> send;
  {
    std::lock_guard lock(intended_mu_);
    for (size_t k = 0; k < n; ++k) {
      if (next[k] == intended_[k]) continue;
      intended_[k] = next[k];
      r.need[k] = ++version_[k];
      r.done[k] = false;
      send.push_back(k);
    }
  }
  uint64_t id = r.id;
  active_.emplace(id, std::move(r));
  for (size_t k : send) dispatch(id, k, 1);
}

void ControllerCore::dispatch(uint64_t id, size_t k, int attempt) {
  auto& r = active_.at(id);
  r.attempts[k] = attempt;
  auto e = event(Kind::kReconfigStart);
  e.rail = cfg_.rails[k];
  e.group = r.p.group;
  e.seq = r.p.seq;
  e.stages = r.stages;
  e.value = attempt;
  record(e);
  act_.reprogram(k);
  act_.arm_timer(id, k, attempt, cfg_.ack_timeout);
}

void ControllerCore::on_rail_result(size_t k, uint64_t v, bool ok, const std::string& error, const TopoId& topo) {
  if (fallback_ != Fallback::kNo) return;  // the giant ring supersedes whatever this was
  if (!ok) {
    problem(fmt::format("rail {}: reprogramming to {} failed: {}", cfg_.rails[k], topo.str(), error));
    std::vector<uint64_t> ids;
    for (auto& [id, r] : active_) {
      if (!r.done[k] && v >= r.need[k]) ids.push_back(id);
    }
    for (auto id : ids) {
      auto it = active_.find(id);
      if (it != active_.end()) retry_or_fallback(it->second, k, error);
      if (fallback_ != Fallback::kNo) return;
    }
    return;
  }
  if (v > confirmed_[k]) {
    confirmed_[k] = v;
    current_[k] = topo;
  }
  std::vector<uint64_t> finished;
  for (auto& [id, r] : active_) {
    if (r.done[k] || confirmed_[k] < r.need[k]) continue;
    r.done[k] = true;
    act_.cancel_timer(id, k);
    auto e = event(Kind::kReconfigEnd);
    e.rail = cfg_.rails[k];
    e.group = r.p.group;
    e.seq = r.p.seq;
    e.stages = r.stages;
    record(e);
    if (std::all_of(r.done.begin(), r.done.end(), [](bool d) { return d; })) finished.push_back(id);
  }
  for (auto id : finished) {
    auto node = active_.extract(id);
    auto& r = node.mapped();
    for (int st : r.stages) busy_[static_cast<size_t>(st)] = false;
    ack_all(r.p, true);
  }
  if (!finished.empty()) pump();
}

void ControllerCore::on_timeout(uint64_t id, size_t k, int attempt) {
  auto it = active_.find(id);
  if (it == active_.end() || it->second.done[k] || it->second.attempts[k] != attempt) return;
  auto e = event(Kind::kTimeout);
  e.rail = cfg_.rails[k];
  e.group = it->second.p.group;
  e.seq = it->second.p.seq;
  e.value = attempt;
  record(e);
  retry_or_fallback(it->second, k,
                    fmt::format("rail {} did not confirm {} within {} ms (attempt {})", cfg_.rails[k],
                                intended_[k].str(), cfg_.ack_timeout.count(), attempt));
}

void ControllerCore::retry_or_fallback(Reconfig& r, size_t k, const std::string& why) {
  if (r.attempts[k] <= cfg_.max_retries) {
    auto e = event(Kind::kRetry);
    e.rail = cfg_.rails[k];
    e.group = r.p.group;
    e.seq = r.p.seq;
    e.value = r.attempts[k] + 1;
    e.detail = why;
    record(e);
    spdlog::warn("controller {}: {}; retrying", cfg_.layout.job, why);
    dispatch(r.id, k, r.attempts[k] + 1);
    return;
  }
  enter_fallback(fmt::format("{}; gave up after {} attempts: falling back to a static giant ring", why, r.attempts[k]));
}

void ControllerCore::enter_fallback(const std::string& reason) {
  if (fallback_ != Fallback::kNo) return;
  fallback_ = Fallback::kDraining;
  fallback_flag_ = true;
  problem(reason);
  auto e = event(Kind::kFallback);
  e.detail = reason;
  record(e);
  // Reconfigurations in progress are abandoned; their ranks get fallback ACKs once the ring is up.
  for (auto& [id, r] : active_) {
    for (size_t k = 0; k < cfg_.rails.size(); ++k) {
      if (!r.done[k]) act_.cancel_timer(id, k);
    }
    queue_.push_front(std::move(r.p));
  }
  active_.clear();
  Message m;
  m.type = MsgType::kFallback;
  m.reason = reason;
  broadcast(m);
  pump();  // applies the ring once no op is in flight (G2 holds for the ring too)
}

void ControllerCore::apply_ring() {
  fallback_ = Fallback::kApplying;
  rings_pending_ = cfg_.rails.size();
  for (size_t k = 0; k < cfg_.rails.size(); ++k) act_.build_ring(k);
}

void ControllerCore::broadcast(const Message& m) {
  for (auto& [r, c] : rank_conn_) act_.send(c, m);
}

std::map<std::string, std::string> ControllerCore::topo_map() const {
  std::map<std::string, std::string> out;
  for (size_t k = 0; k < cfg_.rails.size(); ++k) {
    out[cfg_.rails[k]] = fallback_ == Fallback::kActive ? "ring" : current_[k].str();
  }
  return out;
}

void ControllerCore::on_ring_result(size_t k, const std::string& err) {
  auto e = event(Kind::kRingReady);
  e.rail = cfg_.rails[k];
  e.value = err.empty();
  e.detail = err;
  record(e);
  if (!err.empty()) {
    auto text = fmt::format("rail {}: giant ring failed: {}; the fabric state is unknown", cfg_.rails[k], err);
    problem(text);
    Message m;
    m.type = MsgType::kFallback;
    m.reason = text;
    broadcast(m);
  }
  if (rings_pending_ > 0 && --rings_pending_ == 0) {
    fallback_ = Fallback::kActive;
    std::fill(busy_.begin(), busy_.end(), false);
    pump();
  }
}

void ControllerCore::closed(ConnId c, const std::string& reason, bool ours) {
  auto cit = conns_.find(c);
  if (cit == conns_.end()) return;
  Conn conn = cit->second;
  conns_.erase(cit);
  if (conn.rank < 0) return;
  auto it = rank_conn_.find(conn.rank);
  if (it == rank_conn_.end() || it->second != c) return;
  rank_conn_.erase(it);
  const int r = conn.rank;
  // Its in-flight ops cannot be running any more: release their stages.
  for (const auto& [g, seq] : rank_ops_[r]) {
    const auto& grp = groups_.at(g);
    if (grp.digit < 0) continue;
    for (int st : grp.stages) --inflight_[static_cast<size_t>(st)];
  }
  rank_ops_.erase(r);
  if (ours || conn.bye) {
    pump();
    return;
  }
  lose_rank(r, reason);
}

void ControllerCore::on_port_failed(size_t rail, int port, const std::string& evidence, int64_t seen_mono_ns) {
  if (rail >= cfg_.rails.size()) return;
  if (!failed_.emplace(std::pair{rail, port}, std::pair{seen_mono_ns, evidence}).second) return;  // reported before
  auto e = event(Kind::kPortFailed);
  e.rail = cfg_.rails[rail];
  e.value = port;
  e.detail = evidence;
  record(e);
  problem(fmt::format("rail {}: port {} failed: {}", cfg_.rails[rail], port, evidence));
  act_.mask(rail, port);
}

void ControllerCore::on_mask_result(size_t rail, int port, const MaskOutcome& o) {
  if (rail >= cfg_.rails.size()) return;
  const auto& name = cfg_.rails[rail];
  auto e = event(Kind::kMasked);
  e.rail = name;
  e.rank = o.error.empty() ? o.rank : -1;
  auto seen = failed_.find({rail, port});
  if (seen != failed_.end() && seen->second.first > 0)
    e.value = static_cast<double>(now().monotonic_ns - seen->second.first) / 1e6;
  if (!o.error.empty()) {
    e.detail = fmt::format("port {}: {}", port, o.error);
    record(e);
    problem(fmt::format("rail {}: port {} could not be masked: {}", name, port, o.error));
    return;
  }
  if (o.rank < 0) {
    e.detail = fmt::format("port {} masked; it was on no rank's slot", port);
    record(e);
    return;
  }
  e.detail = fmt::format("port {} masked; rank {} moved from slot {}/{} to {}/{}", port, o.rank, o.from.ingress,
                         o.from.egress, o.to.ingress, o.to.egress);
  record(e);
  problem(fmt::format("rail {}: {} ({:.1f} ms after the failure was seen)", name, e.detail, e.value));
  Message m;
  m.type = MsgType::kMasked;
  m.rail = name;
  m.rank = o.rank;
  m.port = port;
  m.ingress = o.to.ingress;
  m.egress = o.to.egress;
  if (seen != failed_.end()) m.reason = seen->second.second;
  broadcast(m);
}

void ControllerCore::lose_rank(int r, const std::string& reason) {
  lost_.insert(r);
  std::vector<std::string> gs;
  for (const auto& [name, g] : groups_) {
    if (std::binary_search(g.ranks.begin(), g.ranks.end(), r)) gs.push_back(name);
  }
  std::string names;
  for (const auto& n : gs) names += (names.empty() ? "" : ", ") + n;
  auto text = fmt::format("rank {} disconnected ({}); its groups: {}", r, reason, names.empty() ? "none" : names);
  auto e = event(Kind::kDisconnect);
  e.rank = r;
  e.detail = text;
  record(e);
  problem(text);
  // Barriers waiting for it can never complete: tell the ranks waiting in them.
  for (auto bit = barriers_.begin(); bit != barriers_.end();) {
    const auto& g = groups_.at(bit->first.first);
    if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) {
      ++bit;
      continue;
    }
    for (const auto& [waiting, t] : bit->second.ready) {
      auto ws = rank_conn_.find(waiting);
      if (ws == rank_conn_.end()) continue;
      Message m;
      m.type = MsgType::kError;
      m.group = bit->first.first;
      m.seq = bit->first.second;
      m.message = fmt::format("group {} seq {} cannot complete: {}", m.group, m.seq, text);
      act_.send(ws->second, m);
    }
    bit = barriers_.erase(bit);
  }
  Message m;
  m.type = MsgType::kPeerLost;
  m.rank = r;
  m.groups = gs;
  m.reason = reason;
  broadcast(m);
  pump();
}

}  // namespace ocslab::phase
