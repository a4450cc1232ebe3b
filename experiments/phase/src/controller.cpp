#include "ocslab/phase/controller.h"

#include <fmt/format.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/log.h"
#include "ocslab/phase/protocol.h"

namespace ocslab::phase {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
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
  }
  return "?";
}

namespace {

ControllerEvent event(ControllerEvent::Kind k) {
  ControllerEvent e;
  e.kind = k;
  return e;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

struct Session;

struct Controller::Impl {
  explicit Impl(ControllerOptions o)
      : opt(std::move(o)), table(opt.layout), workers(std::max<size_t>(1, opt.rails.size())) {}

  // ---- everything below runs on the event-loop thread unless it says otherwise ----
  struct Group {
    int digit = -1;  // -1: management group, never reconfigures
    std::string dim;
    std::vector<int> ranks;
    std::vector<int> stages;
    int registered_by = -1;
  };
  struct Barrier {
    int digit = 0;
    int64_t op = -1;
    std::map<int, int64_t> ready;  // rank -> monotonic ns of its request
  };
  struct Pending {
    std::string group;
    int64_t seq = 0;
    int digit = 0;
    std::map<int, int64_t> ready;
  };
  struct Reconfig {
    uint64_t id = 0;
    Pending p;
    std::vector<int> stages;     // locked until every rail confirmed
    std::vector<uint64_t> need;  // per rail: intended version that must be confirmed (0: none)
    std::vector<bool> done;
    std::vector<int> attempts;
    std::vector<std::unique_ptr<asio::steady_timer>> timers;
  };
  enum class Fallback { kNo, kDraining, kApplying, kActive };

  void record(ControllerEvent e) {
    auto t = now();
    e.mono_ns = t.monotonic_ns;
    e.real_ns = t.realtime_ns;
    std::lock_guard lock(events_mu);
    events.push_back(std::move(e));
  }
  void problem(std::string text) {
    spdlog::warn("controller {}: {}", opt.layout.job, text);
    std::lock_guard lock(events_mu);
    problems.push_back(std::move(text));
  }

  void start();
  void stop();
  void accept();
  void on_line(const std::shared_ptr<Session>& s, const std::string& line);
  void on_closed(Session& s, const std::string& reason);
  void reject(const std::shared_ptr<Session>& s, const std::string& text, bool close, const std::string& group = {},
              int64_t seq = -1);
  void hello(const std::shared_ptr<Session>& s, const Message& m);
  void do_register(const std::shared_ptr<Session>& s, const Message& m);
  void request(const std::shared_ptr<Session>& s, const Message& m);
  void done_msg(const std::shared_ptr<Session>& s, const Message& m);
  void pump();
  void ack_all(const Pending& p, bool reconfigured);
  void start_reconfig(Pending p, const std::vector<TopoId>& next, const std::vector<int>& stages);
  void dispatch(uint64_t id, size_t rail, int attempt);
  void on_rail_result(size_t rail, uint64_t version, bool ok, const std::string& error, const TopoId& topo);
  void on_timeout(uint64_t id, size_t rail, int attempt);
  void retry_or_fallback(Reconfig& r, size_t rail, const std::string& why);
  void enter_fallback(const std::string& reason);
  void apply_ring();
  void broadcast(const Message& m);
  std::map<std::string, std::string> topo_map() const;

  ControllerOptions opt;
  SubMappingTable table;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{io};
  std::thread loop;
  asio::thread_pool workers;
  std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
  int bound_port = 0;
  bool started = false, stopped = false;

  std::map<std::string, Group> groups;
  std::map<int, std::shared_ptr<Session>> sessions;
  std::set<std::shared_ptr<Session>> all_sessions;
  std::set<int> lost;
  std::map<std::pair<std::string, int64_t>, Barrier> barriers;
  std::deque<Pending> queue;
  std::vector<int> inflight;  // per stage
  std::vector<bool> busy;     // per stage
  std::map<int, std::multiset<std::pair<std::string, int64_t>>> rank_ops;
  std::map<uint64_t, Reconfig> active;
  uint64_t next_id = 0;
  std::vector<TopoId> current;      // per rail, confirmed
  std::vector<uint64_t> confirmed;  // per rail
  Fallback fallback = Fallback::kNo;
  size_t rings_pending = 0;

  // Shared with rail workers.
  std::mutex intended_mu;
  std::vector<TopoId> intended;  // per rail: confirmed + every dispatched change
  std::vector<uint64_t> version;

  mutable std::mutex events_mu;
  std::vector<ControllerEvent> events;
  std::vector<std::string> problems;
  std::atomic<bool> fallback_flag{false};
};

struct Session : std::enable_shared_from_this<Session> {
  Session(Controller::Impl& c, tcp::socket s) : ctl(c), sock(std::move(s)), buf(kMaxLine + 1) {
    boost::system::error_code ec;
    auto ep = sock.remote_endpoint(ec);
    peer = ec ? "?" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
    sock.set_option(tcp::no_delay(true), ec);
  }
  void read() {
    asio::async_read_until(sock, buf, '\n', [self = shared_from_this()](boost::system::error_code ec, size_t n) {
      // A read that completed just before we closed the session (controller stopping) still
      // runs its handler: its lines belong to a session that no longer exists.
      if (self->closed) return;
      if (ec) {
        self->close(ec == asio::error::not_found ? fmt::format("line longer than {} bytes", kMaxLine) : ec.message());
        return;
      }
      std::string line(asio::buffers_begin(self->buf.data()),
                       asio::buffers_begin(self->buf.data()) + static_cast<long>(n) - 1);
      self->buf.consume(n);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      self->ctl.on_line(self, line);
      if (!self->closed) self->read();
    });
  }
  void send(const Message& m) {
    if (closed) return;
    outq.push_back(encode(m) + "\n");
    if (outq.size() == 1) write();
  }
  void write() {
    asio::async_write(sock, asio::buffer(outq.front()),
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec) {
                          self->close(ec.message());
                          return;
                        }
                        self->outq.pop_front();
                        if (!self->outq.empty()) {
                          self->write();
                        } else if (self->close_after_write) {
                          self->close("closed by the controller");
                        }
                      });
  }
  void close(const std::string& reason) {
    if (closed) return;
    closed = true;
    boost::system::error_code ec;
    sock.shutdown(tcp::socket::shutdown_both, ec);
    sock.close(ec);
    ctl.on_closed(*this, reason);
  }

  Controller::Impl& ctl;
  tcp::socket sock;
  asio::streambuf buf;
  std::deque<std::string> outq;
  std::string peer;
  int rank = -1;
  bool closed = false;
  bool bye = false;
  bool close_after_write = false;
};

void Controller::Impl::start() {
  const auto& L = opt.layout;
  L.validate();
  if (opt.rails.empty()) throw Error(fmt::format("controller {}: no rails", L.job));
  for (size_t k = 0; k < opt.rails.size(); ++k) {
    auto t = opt.rails[k]->topology(L.job);  // throws when the job is not placed on the rail
    current.push_back(t ? *t : TopoId::uniform(L, 0));
    strands.push_back(asio::make_strand(workers.get_executor()));
  }
  intended = current;
  confirmed.assign(opt.rails.size(), 0);
  version.assign(opt.rails.size(), 0);
  inflight.assign(static_cast<size_t>(L.pp), 0);
  busy.assign(static_cast<size_t>(L.pp), false);
  boost::system::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(opt.listen_host, ec), static_cast<unsigned short>(opt.listen_port));
  if (ec) throw Error(fmt::format("controller {}: bad listen address '{}': {}", L.job, opt.listen_host, ec.message()));
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error(fmt::format("controller {}: cannot listen on {}:{}: {}", L.job, opt.listen_host, opt.listen_port,
                            ec.message()));
  bound_port = acceptor.local_endpoint().port();
  work.emplace(io.get_executor());
  accept();
  loop = std::thread([this] { io.run(); });
  started = true;
}

void Controller::Impl::stop() {
  if (!started || stopped) return;
  stopped = true;
  std::promise<void> closed;
  asio::post(io, [this, &closed] {
    boost::system::error_code ec;
    acceptor.close(ec);
    for (auto& [id, r] : active) {
      for (auto& t : r.timers) {
        if (t) t->cancel();
      }
    }
    auto all = all_sessions;
    for (const auto& s : all) {
      s->bye = true;  // our own close, not a rank failure
      s->close("controller stopping");
    }
    closed.set_value();
  });
  closed.get_future().wait();
  work.reset();
  io.stop();
  loop.join();
  workers.join();
}

void Controller::Impl::accept() {
  acceptor.async_accept([this](boost::system::error_code ec, tcp::socket sock) {
    if (ec) {
      if (ec != asio::error::operation_aborted) spdlog::warn("controller {}: accept: {}", opt.layout.job, ec.message());
      if (acceptor.is_open()) accept();
      return;
    }
    auto s = std::make_shared<Session>(*this, std::move(sock));
    all_sessions.insert(s);
    s->read();
    accept();
  });
}

void Controller::Impl::reject(const std::shared_ptr<Session>& s, const std::string& text, bool close,
                              const std::string& group, int64_t seq) {
  auto e = event(Kind::kRejected);
  e.rank = s->rank;
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
  s->send(m);
  if (close) {
    s->close_after_write = true;
    if (s->outq.empty()) s->close("rejected");
  }
}

void Controller::Impl::on_line(const std::shared_ptr<Session>& s, const std::string& line) {
  if (line.empty()) return;
  Message m;
  try {
    m = decode(line, s->rank >= 0 ? fmt::format("rank {}", s->rank) : fmt::format("client {}", s->peer));
  } catch (const ProtocolError& e) {
    reject(s, e.what(), true);
    return;
  }
  if (m.type != MsgType::kHello && s->rank < 0) {
    reject(s, fmt::format("client {}: '{}' before hello", s->peer, to_string(m.type)), true);
    return;
  }
  switch (m.type) {
    case MsgType::kHello:
      hello(s, m);
      break;
    case MsgType::kRegister:
      do_register(s, m);
      break;
    case MsgType::kRequest:
      request(s, m);
      break;
    case MsgType::kDone:
      done_msg(s, m);
      break;
    case MsgType::kBye:
      s->bye = true;
      s->close("bye");
      break;
    default:
      reject(s, fmt::format("rank {}: '{}' is a controller message", s->rank, to_string(m.type)), true);
  }
}

void Controller::Impl::hello(const std::shared_ptr<Session>& s, const Message& m) {
  const auto& L = opt.layout;
  if (s->rank >= 0) return reject(s, fmt::format("rank {}: second hello", s->rank), true);
  if (m.job != L.job) {
    return reject(s, fmt::format("rank {}: hello for job '{}' but this controller runs job '{}'", m.rank, m.job, L.job),
                  true);
  }
  if (m.world != L.ranks()) {
    return reject(s,
                  fmt::format("rank {}: joined with world size {} but job {} has {} ranks (pp={}, {} per stage)",
                              m.rank, m.world, L.job, L.ranks(), L.pp, L.ranks_per_stage()),
                  true);
  }
  if (m.rank >= L.ranks())
    return reject(s, fmt::format("rank {}: job {} has ranks 0..{}", m.rank, L.job, L.ranks() - 1), true);
  if (sessions.count(m.rank)) return reject(s, fmt::format("rank {}: already connected", m.rank), true);
  s->rank = m.rank;
  sessions[m.rank] = s;
  lost.erase(m.rank);
  Message w;
  w.type = MsgType::kWelcome;
  w.job = L.job;
  w.rank = m.rank;
  w.topo = topo_map();
  w.fallback = fallback != Fallback::kNo;
  s->send(w);
}

void Controller::Impl::do_register(const std::shared_ptr<Session>& s, const Message& m) {
  const auto& L = opt.layout;
  const int r = s->rank;
  Group g;
  g.dim = m.dim;
  if (m.dim == "mgmt") {
    g.digit = -1;
  } else {
    try {
      g.digit = L.digit_of(m.dim);
    } catch (const TopologyError& e) {
      return reject(s, fmt::format("rank {} group {}: {}", r, m.group, e.what()), false, m.group);
    }
  }
  g.ranks = m.ranks;
  std::sort(g.ranks.begin(), g.ranks.end());
  if (g.ranks.empty() || std::adjacent_find(g.ranks.begin(), g.ranks.end()) != g.ranks.end()) {
    return reject(
        s,
        fmt::format("rank {} group {}: ranks [{}] must be a non-empty list without repeats", r, m.group, join(m.ranks)),
        false, m.group);
  }
  if (g.ranks.back() >= L.ranks()) {
    return reject(s,
                  fmt::format("rank {} group {}: rank {} is outside job {} (0..{})", r, m.group, g.ranks.back(), L.job,
                              L.ranks() - 1),
                  false, m.group);
  }
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) {
    return reject(s, fmt::format("rank {} registers group {} without being in it ([{}])", r, m.group, join(g.ranks)),
                  false, m.group);
  }
  // A disagreement with what another rank registered is the more useful message: check it first.
  auto it = groups.find(m.group);
  if (it != groups.end()) {
    const auto& old = it->second;
    if (old.ranks.size() != g.ranks.size() || old.ranks != g.ranks || old.dim != g.dim) {
      return reject(
          s,
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
    return reject(s,
                  fmt::format("rank {} group {}: a {} group lives in one pipeline stage, these ranks span stages {}", r,
                              m.group, m.dim, join(g.stages)),
                  false, m.group);
  }
  if (it == groups.end()) {
    g.registered_by = r;
    groups[m.group] = g;
  }
  Message ok;
  ok.type = MsgType::kRegistered;
  ok.group = m.group;
  s->send(ok);
}

void Controller::Impl::request(const std::shared_ptr<Session>& s, const Message& m) {
  const int r = s->rank;
  auto git = groups.find(m.group);
  if (git == groups.end())
    return reject(s, fmt::format("rank {}: unknown group '{}'", r, m.group), false, m.group, m.seq);
  const auto& g = git->second;
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) {
    return reject(s, fmt::format("rank {}: not a member of group {}", r, m.group), false, m.group, m.seq);
  }
  int digit = g.digit;
  if (m.digit && g.digit < 0) {
    return reject(
        s,
        fmt::format("rank {} group {}: a management group never reconfigures (digit {} given)", r, m.group, *m.digit),
        false, m.group, m.seq);
  }
  if (m.digit) {
    if (*m.digit > static_cast<int>(opt.layout.dims.size())) {
      return reject(s,
                    fmt::format("rank {} group {}: topo digit {} names a dimension job {} lacks ({})", r, m.group,
                                *m.digit, opt.layout.job, opt.layout.describe_digits()),
                    false, m.group, m.seq);
    }
    digit = *m.digit;
  }
  for (int x : g.ranks) {
    if (lost.count(x)) {
      return reject(s, fmt::format("rank {} group {}: rank {} of the group is disconnected", r, m.group, x), false,
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
  auto& b = barriers[key];
  if (b.ready.empty()) {
    b.digit = digit;
    b.op = m.op;
  } else if (b.digit != digit) {
    return reject(s,
                  fmt::format("rank {} group {} seq {}: asks for digit {} but the group's other ranks asked for {}", r,
                              m.group, m.seq, digit, b.digit),
                  false, m.group, m.seq);
  }
  if (b.ready.count(r))
    return reject(s, fmt::format("rank {} group {}: seq {} requested twice", r, m.group, m.seq), false, m.group, m.seq);
  b.ready[r] = monotonic_ns();
  if (b.ready.size() < g.ranks.size()) return;
  Pending p{m.group, m.seq, b.digit, std::move(b.ready)};
  barriers.erase(key);
  if (g.digit < 0) {
    ack_all(p, false);  // management: every rank asked, nothing to change
    return;
  }
  queue.push_back(std::move(p));
  pump();
}

void Controller::Impl::done_msg(const std::shared_ptr<Session>& s, const Message& m) {
  auto& ops = rank_ops[s->rank];
  auto it = ops.find({m.group, m.seq});
  if (it == ops.end()) {
    return reject(s, fmt::format("rank {} group {}: done for seq {} that was never ACKed", s->rank, m.group, m.seq),
                  false, m.group, m.seq);
  }
  ops.erase(it);
  const auto& g = groups.at(m.group);
  if (g.digit >= 0) {
    for (int st : g.stages) --inflight[static_cast<size_t>(st)];
  }
  auto e = event(Kind::kDone);
  e.rank = s->rank;
  e.group = m.group;
  e.seq = m.seq;
  e.stages = g.stages;
  record(e);
  pump();
}

void Controller::Impl::ack_all(const Pending& p, bool reconfigured) {
  const auto& g = groups.at(p.group);
  const bool fb = fallback != Fallback::kNo;
  auto topo = topo_map();
  int64_t t = monotonic_ns();
  for (int r : g.ranks) {
    auto it = sessions.find(r);
    if (it == sessions.end()) continue;    // lost meanwhile: reported already
    rank_ops[r].insert({p.group, p.seq});  // management ops too, so their done is accepted
    if (g.digit >= 0) {
      for (int st : g.stages) ++inflight[static_cast<size_t>(st)];
    }
    Message a;
    a.type = MsgType::kAck;
    a.group = p.group;
    a.seq = p.seq;
    a.topo = topo;
    a.reconfigured = reconfigured;
    a.fallback = fb;
    auto rt = p.ready.find(r);
    a.wait_us = rt == p.ready.end() ? 0 : (t - rt->second) / 1000;
    auto e = event(Kind::kAck);
    e.rank = r;
    e.group = p.group;
    e.seq = p.seq;
    e.stages = g.digit >= 0 ? g.stages : std::vector<int>{};
    e.value = reconfigured;
    record(e);
    it->second->send(a);
  }
}

void Controller::Impl::pump() {
  if (fallback == Fallback::kDraining) {
    bool idle = true;
    for (int n : inflight) idle = idle && n == 0;
    if (idle) apply_ring();
  }
  std::set<int> blocked;
  for (auto it = queue.begin(); it != queue.end();) {
    const auto& g = groups.at(it->group);
    bool wait = fallback == Fallback::kDraining || fallback == Fallback::kApplying;
    for (int st : g.stages) wait = wait || busy[static_cast<size_t>(st)] || blocked.count(st);
    if (wait) {
      blocked.insert(g.stages.begin(), g.stages.end());
      ++it;
      continue;
    }
    if (fallback == Fallback::kActive) {
      ack_all(*it, false);
      it = queue.erase(it);
      continue;
    }
    std::vector<TopoId> next = intended;
    std::set<int> touched;
    for (size_t k = 0; k < next.size(); ++k) {
      for (int st : g.stages) next[k].set(st, it->digit);
      for (int st : table.touched_stages(intended[k], next[k])) touched.insert(st);
    }
    if (touched.empty()) {  // the fabric already has it: ACK without changing anything
      ack_all(*it, false);
      it = queue.erase(it);
      continue;
    }
    bool hold = false;
    for (int st : touched)
      hold = hold || busy[static_cast<size_t>(st)] || inflight[static_cast<size_t>(st)] > 0 || blocked.count(st);
    if (hold) {  // G2: an op is in flight on a stage this change disturbs
      blocked.insert(g.stages.begin(), g.stages.end());
      blocked.insert(touched.begin(), touched.end());
      ++it;
      continue;
    }
    Pending p = std::move(*it);
    it = queue.erase(it);
    start_reconfig(std::move(p), next, {touched.begin(), touched.end()});
  }
}

void Controller::Impl::start_reconfig(Pending p, const std::vector<TopoId>& next, const std::vector<int>& stages) {
  Reconfig r;
  r.id = ++next_id;
  r.p = std::move(p);
  r.stages = stages;
  const size_t n = opt.rails.size();
  r.need.assign(n, 0);
  r.done.assign(n, true);
  r.attempts.assign(n, 0);
  r.timers.resize(n);
  for (int st : stages) busy[static_cast<size_t>(st)] = true;
  std::vector<size_t> send;
  {
    std::lock_guard lock(intended_mu);
    for (size_t k = 0; k < n; ++k) {
      if (next[k] == intended[k]) continue;
      intended[k] = next[k];
      r.need[k] = ++version[k];
      r.done[k] = false;
      send.push_back(k);
    }
  }
  uint64_t id = r.id;
  active.emplace(id, std::move(r));
  for (size_t k : send) dispatch(id, k, 1);
}

void Controller::Impl::dispatch(uint64_t id, size_t k, int attempt) {
  auto& r = active.at(id);
  r.attempts[k] = attempt;
  auto e = event(Kind::kReconfigStart);
  e.rail = opt.rails[k]->rail();
  e.group = r.p.group;
  e.seq = r.p.seq;
  e.stages = r.stages;
  e.value = attempt;
  record(e);
  auto orch = opt.rails[k];
  asio::post(strands[k], [this, orch, k] {
    TopoId t;
    uint64_t v;
    {
      std::lock_guard lock(intended_mu);
      t = intended[k];
      v = version[k];
    }
    try {
      orch->set_topology(opt.layout.job, t);
      asio::post(io, [this, k, v, t] { on_rail_result(k, v, true, {}, t); });
    } catch (const std::exception& ex) {
      asio::post(io, [this, k, v, t, err = std::string(ex.what())] { on_rail_result(k, v, false, err, t); });
    }
  });
  r.timers[k] = std::make_unique<asio::steady_timer>(io, opt.ack_timeout);
  r.timers[k]->async_wait([this, id, k, attempt](boost::system::error_code ec) {
    if (!ec) on_timeout(id, k, attempt);
  });
}

void Controller::Impl::on_rail_result(size_t k, uint64_t v, bool ok, const std::string& error, const TopoId& topo) {
  if (fallback != Fallback::kNo) return;  // the giant ring supersedes whatever this was
  if (!ok) {
    problem(fmt::format("rail {}: reprogramming to {} failed: {}", opt.rails[k]->rail(), topo.str(), error));
    std::vector<uint64_t> ids;
    for (auto& [id, r] : active) {
      if (!r.done[k] && v >= r.need[k]) ids.push_back(id);
    }
    for (auto id : ids) {
      auto it = active.find(id);
      if (it != active.end()) retry_or_fallback(it->second, k, error);
      if (fallback != Fallback::kNo) return;
    }
    return;
  }
  if (v > confirmed[k]) {
    confirmed[k] = v;
    current[k] = topo;
  }
  std::vector<uint64_t> finished;
  for (auto& [id, r] : active) {
    if (r.done[k] || confirmed[k] < r.need[k]) continue;
    r.done[k] = true;
    if (r.timers[k]) r.timers[k]->cancel();
    auto e = event(Kind::kReconfigEnd);
    e.rail = opt.rails[k]->rail();
    e.group = r.p.group;
    e.seq = r.p.seq;
    e.stages = r.stages;
    record(e);
    if (std::all_of(r.done.begin(), r.done.end(), [](bool d) { return d; })) finished.push_back(id);
  }
  for (auto id : finished) {
    auto node = active.extract(id);
    auto& r = node.mapped();
    for (int st : r.stages) busy[static_cast<size_t>(st)] = false;
    ack_all(r.p, true);
  }
  if (!finished.empty()) pump();
}

void Controller::Impl::on_timeout(uint64_t id, size_t k, int attempt) {
  auto it = active.find(id);
  if (it == active.end() || it->second.done[k] || it->second.attempts[k] != attempt) return;
  auto e = event(Kind::kTimeout);
  e.rail = opt.rails[k]->rail();
  e.group = it->second.p.group;
  e.seq = it->second.p.seq;
  e.value = attempt;
  record(e);
  retry_or_fallback(it->second, k,
                    fmt::format("rail {} did not confirm {} within {} ms (attempt {})", opt.rails[k]->rail(),
                                intended[k].str(), opt.ack_timeout.count(), attempt));
}

void Controller::Impl::retry_or_fallback(Reconfig& r, size_t k, const std::string& why) {
  if (r.attempts[k] <= opt.max_retries) {
    auto e = event(Kind::kRetry);
    e.rail = opt.rails[k]->rail();
    e.group = r.p.group;
    e.seq = r.p.seq;
    e.value = r.attempts[k] + 1;
    e.detail = why;
    record(e);
    spdlog::warn("controller {}: {}; retrying", opt.layout.job, why);
    dispatch(r.id, k, r.attempts[k] + 1);
    return;
  }
  enter_fallback(fmt::format("{}; gave up after {} attempts: falling back to a static giant ring", why, r.attempts[k]));
}

void Controller::Impl::enter_fallback(const std::string& reason) {
  if (fallback != Fallback::kNo) return;
  fallback = Fallback::kDraining;
  fallback_flag = true;
  problem(reason);
  auto e = event(Kind::kFallback);
  e.detail = reason;
  record(e);
  // Reconfigurations in progress are abandoned; their ranks get fallback ACKs once the ring is up.
  for (auto& [id, r] : active) {
    for (auto& t : r.timers) {
      if (t) t->cancel();
    }
    queue.push_front(std::move(r.p));
  }
  active.clear();
  Message m;
  m.type = MsgType::kFallback;
  m.reason = reason;
  broadcast(m);
  pump();  // applies the ring once no op is in flight (G2 holds for the ring too)
}

void Controller::Impl::apply_ring() {
  fallback = Fallback::kApplying;
  rings_pending = opt.rails.size();
  for (size_t k = 0; k < opt.rails.size(); ++k) {
    auto orch = opt.rails[k];
    asio::post(strands[k], [this, orch, k] {
      std::string err;
      try {
        orch->set_giant_ring(opt.layout.job);
      } catch (const std::exception& ex) {
        err = ex.what();
      }
      asio::post(io, [this, k, err] {
        auto e = event(Kind::kRingReady);
        e.rail = opt.rails[k]->rail();
        e.value = err.empty();
        e.detail = err;
        record(e);
        if (!err.empty()) {
          auto text =
              fmt::format("rail {}: giant ring failed: {}; the fabric state is unknown", opt.rails[k]->rail(), err);
          problem(text);
          Message m;
          m.type = MsgType::kFallback;
          m.reason = text;
          broadcast(m);
        }
        if (--rings_pending == 0) {
          fallback = Fallback::kActive;
          std::fill(busy.begin(), busy.end(), false);
          pump();
        }
      });
    });
  }
}

void Controller::Impl::broadcast(const Message& m) {
  for (auto& [r, s] : sessions) s->send(m);
}

std::map<std::string, std::string> Controller::Impl::topo_map() const {
  std::map<std::string, std::string> out;
  for (size_t k = 0; k < opt.rails.size(); ++k) {
    out[opt.rails[k]->rail()] = fallback == Fallback::kActive ? "ring" : current[k].str();
  }
  return out;
}

void Controller::Impl::on_closed(Session& s, const std::string& reason) {
  std::shared_ptr<Session> keep;
  for (const auto& x : all_sessions) {
    if (x.get() == &s) keep = x;
  }
  all_sessions.erase(keep);
  if (s.rank < 0) return;
  auto it = sessions.find(s.rank);
  if (it == sessions.end() || it->second.get() != &s) return;
  sessions.erase(it);
  const int r = s.rank;
  // Its in-flight ops cannot be running any more: release their stages.
  for (const auto& [g, seq] : rank_ops[r]) {
    const auto& grp = groups.at(g);
    if (grp.digit < 0) continue;
    for (int st : grp.stages) --inflight[static_cast<size_t>(st)];
  }
  rank_ops.erase(r);
  if (s.bye) {
    pump();
    return;
  }
  lost.insert(r);
  std::vector<std::string> gs;
  for (const auto& [name, g] : groups) {
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
  for (auto bit = barriers.begin(); bit != barriers.end();) {
    const auto& g = groups.at(bit->first.first);
    if (!std::binary_search(g.ranks.begin(), g.ranks.end(), r)) {
      ++bit;
      continue;
    }
    for (const auto& [waiting, t] : bit->second.ready) {
      auto ws = sessions.find(waiting);
      if (ws == sessions.end()) continue;
      Message m;
      m.type = MsgType::kError;
      m.group = bit->first.first;
      m.seq = bit->first.second;
      m.message = fmt::format("group {} seq {} cannot complete: {}", m.group, m.seq, text);
      ws->second->send(m);
    }
    bit = barriers.erase(bit);
  }
  Message m;
  m.type = MsgType::kPeerLost;
  m.rank = r;
  m.groups = gs;
  m.reason = reason;
  broadcast(m);
  pump();
}

Controller::Controller(ControllerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Controller::~Controller() { stop(); }
void Controller::start() { impl_->start(); }
void Controller::stop() { impl_->stop(); }
int Controller::port() const { return impl_->bound_port; }

std::vector<ControllerEvent> Controller::events() const {
  std::lock_guard lock(impl_->events_mu);
  return impl_->events;
}
std::vector<std::string> Controller::problems() const {
  std::lock_guard lock(impl_->events_mu);
  return impl_->problems;
}
bool Controller::in_fallback() const { return impl_->fallback_flag; }

}  // namespace ocslab::phase
