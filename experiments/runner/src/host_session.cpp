#include "ocslab/runner/host_session.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cctype>
#include <ctime>
#include <exception>
#include <thread>

#include "ocslab/common/log.h"
#include "ocslab/ocsctl/errors.h"

namespace ocslab::runner {

namespace {

using namespace std::chrono_literals;

// The reader's slice: how long a stop() or drop() waits at most for the reader to notice.
constexpr auto kReadSlice = 50ms;
// How long the reader keeps trying to replace a dropped session before it calls the host lost
// (stop() tries once more at the end of the run).
constexpr auto kResumeWindow = 30s;

// UTC wall time with milliseconds, so a report's errors can be lined up with the timeline.
std::string now_stamp() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(t), ms % 1000);
}

// Re-throws the exception being handled with the host's name in front, keeping its type for
// the ones callers tell apart.
[[noreturn]] void rethrow_named(const std::string& host) {
  try {
    throw;
  } catch (const ocs::ConnectionError& e) {
    throw ocs::ConnectionError(host + ": " + e.what());
  } catch (const ocs::TimeoutError& e) {
    throw ocs::TimeoutError(host + ": " + e.what());
  } catch (const agent::AgentError& e) {
    throw agent::AgentError(host + ": " + e.what());
  } catch (const agent::ProtocolError& e) {
    throw agent::ProtocolError(host + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(host + ": " + e.what());
  }
}

}  // namespace

const char* to_string(HostState s) {
  switch (s) {
    case HostState::kIdle:
      return "idle";
    case HostState::kConnected:
      return "connected";
    case HostState::kCapturing:
      return "capturing";
    case HostState::kLost:
      return "lost";
    case HostState::kStopped:
      return "stopped";
  }
  return "?";
}

HostSession::HostSession(HostTarget target, HostSampleSink sink, std::shared_ptr<HandshakeGate> gate)
    : target_(std::move(target)), sink_(std::move(sink)), gate_(std::move(gate)) {
  report_.name = target_.name;
}

HostSession::~HostSession() {
  join_reader();
  client_.reset();
}

void HostSession::fail(const std::string& what) {
  spdlog::warn("{}: {}", target_.name, what);
  std::lock_guard lock(mutex_);
  report_.errors.push_back(now_stamp() + " " + what);
  health_.error = what;
}

void HostSession::set_state(HostState s) {
  std::lock_guard lock(mutex_);
  health_.state = s;
}

HostState HostSession::state() const {
  std::lock_guard lock(mutex_);
  return health_.state;
}

HostHealth HostSession::health() const {
  std::lock_guard lock(mutex_);
  return health_;
}

agent::HelloInfo HostSession::hello() const {
  std::lock_guard lock(mutex_);
  return report_.hello;
}

void HostSession::deliver(const agent::SeqSample& s) {
  // Only the thread that owns client_ gets here, so delivered_seq_ needs no lock.
  if (s.seq <= delivered_seq_) return;
  if (!recovering_ && delivered_seq_ != 0 && s.seq != delivered_seq_ + 1) {
    fail(fmt::format("live stream skipped from seq {} to {}", delivered_seq_, s.seq));
  }
  delivered_seq_ = s.seq;
  agent::SeqSample out = s;
  out.sample.host = target_.name;
  sink_(target_.name, out);
  std::lock_guard lock(mutex_);
  ++health_.samples;
  health_.last_sample_ns = out.sample.t_ns;
  if (recovering_) ++report_.recovered;
}

std::unique_ptr<agent::AgentClient> HostSession::open_client(std::chrono::steady_clock::time_point* queue_end) {
  std::unique_ptr<ocs::Stream> stream;
  {
    HandshakeGate::Ticket ticket = gate_ ? gate_->enter() : HandshakeGate::Ticket();
    if (queue_end) *queue_end = std::chrono::steady_clock::now();
    stream = agent::ssh_exec(target_.ssh, target_.agent_command);  // authenticated, channel open
  }
  auto c = std::make_unique<agent::AgentClient>(std::move(stream), target_.request_timeout);
  c->on_sample([this](const agent::SeqSample& s) { deliver(s); });
  return c;
}

void HostSession::connect() {
  if (client_) throw Error(target_.name + ": already connected");
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  const auto t0 = steady_clock::now();
  try {
    ConnectPhases phases;
    steady_clock::time_point queued = t0;
    auto c = open_client(&queued);
    const auto t1 = steady_clock::now();
    // One clock reading ends a phase and starts the next: no time between them is left out.
    phases.queue = duration_cast<milliseconds>(queued - t0);
    phases.ssh = duration_cast<milliseconds>(t1 - queued);
    agent::HelloInfo hello = c->hello();
    const auto t2 = steady_clock::now();
    agent::ClockEstimate clock = c->estimate_clock(target_.clock_exchanges);
    const auto t3 = steady_clock::now();
    phases.hello = duration_cast<milliseconds>(t2 - t1);
    phases.clock = duration_cast<milliseconds>(t3 - t2);
    {
      std::lock_guard lock(mutex_);
      report_.hello = std::move(hello);
      report_.clock_before = clock;
      report_.connect_time = duration_cast<milliseconds>(t3 - t0);
      report_.connect_phases = phases;
      health_.state = HostState::kConnected;
      health_.error.clear();
    }
    client_ = std::move(c);
  } catch (const std::exception& e) {
    fail(std::string("connect: ") + e.what());
    rethrow_named(target_.name);
  }
}

const agent::StartResult& HostSession::start() {
  HostState st = state();
  if (!client_ || st != HostState::kConnected) {
    throw Error(target_.name + ": start() needs a connected session, the host is " + to_string(st));
  }
  agent::StartResult started;
  try {
    started = client_->start(target_.probes, target_.run);
  } catch (const std::exception& e) {
    fail(std::string("probes.start: ") + e.what());
    rethrow_named(target_.name);
  }
  // The capture exists even when no probe could run: stop() ends it either way.
  started_ = true;
  std::string unavailable;
  size_t running = 0;
  for (const auto& p : started.probes) {
    if (p.available) {
      ++running;
    } else {
      unavailable += fmt::format("{}{}: {}", unavailable.empty() ? "" : "; ", p.name, p.reason);
    }
  }
  {
    std::lock_guard lock(mutex_);
    report_.started = started;
  }
  if (running == 0) {
    fail("none of the probes can run: " + (unavailable.empty() ? std::string("no probe requested") : unavailable));
    throw agent::AgentError(target_.name + ": none of the probes can run: " + unavailable);
  }
  if (!unavailable.empty()) fail("probes not running: " + unavailable);
  set_state(HostState::kCapturing);
  reading_ = true;
  reader_ = std::thread([this] { reader_loop(); });
  return report_.started;
}

void HostSession::reader_loop() {
  while (reading_.load()) {
    if (drop_requested_.exchange(false)) {
      client_->close();
      fail("session dropped without a goodbye (drop())");
      set_state(HostState::kLost);
      return;
    }
    try {
      client_->poll_for(kReadSlice);
    } catch (const std::exception& e) {
      // The agent may still be capturing (only the SSH session died): take up the stream again.
      if (resume_after_drop(e.what())) continue;
      fail(std::string("session lost: ") + e.what());
      set_state(HostState::kLost);
      return;
    }
  }
}

bool HostSession::resume_after_drop(const std::string& why) {
  if (!started_) return false;
  spdlog::warn("{}: session dropped ({}); reconnecting", target_.name, why);
  {
    std::lock_guard lock(mutex_);
    health_.error = "session dropped: reconnecting";
  }
  client_.reset();
  const auto t0 = std::chrono::steady_clock::now();
  std::string last_error;
  for (auto wait = 500ms; reading_.load() && std::chrono::steady_clock::now() - t0 < kResumeWindow;
       wait = std::min<std::chrono::milliseconds>(wait * 2, 4s)) {
    try {
      auto c = open_client();
      agent::HelloInfo hello = c->hello();
      long long before = 0;
      {
        std::lock_guard lock(mutex_);
        before = report_.hello.pid;
      }
      if (hello.pid != before) {  // the capture died with its daemon: stop() reports it
        last_error = fmt::format("the agent's daemon is another one (pid {}, was {})", hello.pid, before);
        c->bye();
        break;
      }
      client_ = std::move(c);
      const uint64_t from = delivered_seq_ + 1;
      uint64_t before_count = 0;
      {
        std::lock_guard lock(mutex_);
        before_count = report_.recovered;
      }
      // The gap page by page from the spool, then (follow) the live stream after it.
      recovering_ = true;
      client_->fetch(from, /*follow=*/true, agent::kDefaultFetchPage);
      recovering_ = false;
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
      std::string note;
      {
        std::lock_guard lock(mutex_);
        ++report_.resumed;
        note = fmt::format("session dropped ({}); a new session took the stream up again after {} ms, {} sample(s) "
                           "from seq {} fetched from the spool",
                           why, took.count(), report_.recovered - before_count, from);
        report_.errors.push_back(now_stamp() + " " + note);
        ++health_.resumed;
        health_.resume_note = note;
        health_.error.clear();
        health_.state = HostState::kCapturing;
      }
      spdlog::info("{}: {}", target_.name, note);
      return true;
    } catch (const std::exception& e) {
      recovering_ = false;
      client_.reset();
      last_error = e.what();
    }
    const auto until = std::chrono::steady_clock::now() + wait;
    while (reading_.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(kReadSlice);
  }
  if (!last_error.empty()) fail("reconnect: " + last_error);
  return false;
}

void HostSession::join_reader() {
  reading_ = false;
  if (reader_.joinable()) reader_.join();
}

void HostSession::drop() {
  if (reader_.joinable()) {
    drop_requested_ = true;
    reader_.join();  // the reader closes the session itself: the client is its alone meanwhile
    drop_requested_ = false;
    reading_ = false;
    return;
  }
  if (client_) {
    client_->close();
    fail("session dropped without a goodbye (drop())");
    set_state(HostState::kLost);
  }
}

void HostSession::recover() {
  try {
    auto c = open_client();
    agent::HelloInfo hello = c->hello();
    long long before = 0;
    {
      std::lock_guard lock(mutex_);
      report_.pid_after = hello.pid;
      before = report_.hello.pid;
    }
    if (hello.pid != before) {
      // The bridge started a fresh daemon: the capture (and its spool) died with the old one.
      {
        std::lock_guard lock(mutex_);
        report_.lost = true;
      }
      fail(fmt::format(
          "agent gone: its daemon (pid {}) no longer answers; a new one (pid {}) has no capture; samples up to seq {} "
          "are kept",
          before, hello.pid, delivered_seq_));
      try {
        c->bye();
      } catch (const std::exception& e) {
        fail(std::string("bye to the new daemon: ") + e.what());
      }
      return;
    }
    if (started_) {
      uint64_t last = c->stop();
      {
        std::lock_guard lock(mutex_);
        report_.last_seq = last;
      }
      // Not the session that started the capture: it does not follow live, the spool has all.
      // Paged (each page its own timeout, samples to the sink as they come): any gap.
      if (delivered_seq_ < last) {
        recovering_ = true;
        c->fetch(delivered_seq_ + 1, /*follow=*/false, agent::kDefaultFetchPage);
        recovering_ = false;
      }
    }
    client_ = std::move(c);
  } catch (const std::exception& e) {
    recovering_ = false;
    {
      std::lock_guard lock(mutex_);
      report_.lost = true;
    }
    fail(fmt::format("agent gone: reconnect failed: {}; samples up to seq {} are kept", e.what(), delivered_seq_));
  }
}

HostReport HostSession::report() const {
  std::lock_guard lock(mutex_);
  return report_;
}

HostReport HostSession::reattach(const agent::HelloInfo& at_start, uint64_t delivered_seq) {
  {
    std::lock_guard lock(mutex_);
    report_.name = target_.name;
    report_.hello = at_start;
    health_.state = HostState::kLost;  // stop() then takes the reconnect + spool path
  }
  delivered_seq_ = delivered_seq;
  started_ = true;
  return stop();
}

HostReport HostSession::stop() {
  join_reader();
  HostState st = state();
  if (st == HostState::kStopped) {
    std::lock_guard lock(mutex_);
    return report_;
  }
  if (st == HostState::kIdle) {
    fail("stop: the host was never connected");
    std::lock_guard lock(mutex_);
    report_.lost = true;
    health_.state = HostState::kLost;
    return report_;
  }
  bool session_ok = client_ && st != HostState::kLost;
  if (session_ok && started_) {
    try {
      uint64_t last = client_->stop();
      {
        std::lock_guard lock(mutex_);
        report_.last_seq = last;
      }
      // Following live, every sample up to last has arrived; anything short of it is in the spool.
      if (delivered_seq_ < last) {
        fail(fmt::format("live stream ended at seq {} of {}: fetching the rest from the spool", delivered_seq_, last));
        recovering_ = true;
        client_->fetch(delivered_seq_ + 1, /*follow=*/false, agent::kDefaultFetchPage);
        recovering_ = false;
      }
    } catch (const std::exception& e) {
      recovering_ = false;
      fail(std::string("probes.stop: ") + e.what());
      session_ok = false;
    }
  }
  if (!session_ok) {
    client_.reset();
    recover();
  }
  if (client_) {
    try {
      agent::ClockEstimate after = client_->estimate_clock(target_.clock_exchanges);
      {
        std::lock_guard lock(mutex_);
        report_.clock_after = after;
      }
      client_->bye();
    } catch (const std::exception& e) {
      fail(std::string("closing the session: ") + e.what());
    }
    client_.reset();
  }
  std::lock_guard lock(mutex_);
  if (!report_.lost && started_ && delivered_seq_ < report_.last_seq) {
    std::string what = fmt::format("samples missing: delivered up to seq {} of {}", delivered_seq_, report_.last_seq);
    spdlog::warn("{}: {}", target_.name, what);
    report_.errors.push_back(now_stamp() + " " + what);
    health_.error = what;
  }
  report_.samples = health_.samples;
  health_.state = report_.lost ? HostState::kLost : HostState::kStopped;
  return report_;
}

std::string spool_run_id(const std::string& run_id) {
  std::string out = run_id.substr(0, agent::kMaxRunBytes);
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || !(std::isalnum(u) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  if (!out.empty() && out[0] == '.') out[0] = '_';
  return out;
}

std::string release_spool(const HostTarget& target, const std::string& capture, HandshakeGate* gate) {
  try {
    std::unique_ptr<ocs::Stream> stream;
    {
      HandshakeGate::Ticket ticket = gate ? gate->enter() : HandshakeGate::Ticket();
      stream = agent::ssh_exec(target.ssh, target.agent_command);
    }
    agent::AgentClient c(std::move(stream), target.request_timeout);
    c.hello();
    c.delete_spool(capture);
    c.bye();
    return {};
  } catch (const std::exception& e) {
    return fmt::format("{}: spool.delete of capture {}: {}", target.name, capture, e.what());
  }
}

// ---- SessionPool ----

namespace {

// Runs f(session) on one thread per session; returns each one's failure ("" when none).
template <typename F>
std::vector<std::string> fan_out(std::vector<std::unique_ptr<HostSession>>& sessions, F f) {
  std::vector<std::string> errors(sessions.size());
  std::vector<std::thread> threads;
  threads.reserve(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        f(*sessions[i], i);
      } catch (const std::exception& e) {
        errors[i] = e.what();
        if (errors[i].empty()) errors[i] = sessions[i]->name() + ": failed";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

void SessionPool::add(HostTarget target) {
  sessions_.push_back(std::make_unique<HostSession>(std::move(target), sink_, gate_));
}

std::vector<std::string> SessionPool::connect_all() {
  return fan_out(sessions_, [](HostSession& s, size_t) { s.connect(); });
}

std::vector<std::string> SessionPool::start_all() {
  return fan_out(sessions_, [](HostSession& s, size_t) {
    HostState st = s.health().state;
    // A host that did not connect has its failure from connect_all already.
    if (st != HostState::kConnected) throw Error(s.name() + ": not started, the host is " + to_string(st));
    s.start();
  });
}

std::vector<HostReport> SessionPool::stop_all() {
  std::vector<HostReport> reports(sessions_.size());
  fan_out(sessions_, [&](HostSession& s, size_t i) { reports[i] = s.stop(); });
  return reports;
}

std::vector<HostHealth> SessionPool::health() const {
  std::vector<HostHealth> out;
  out.reserve(sessions_.size());
  for (const auto& s : sessions_) out.push_back(s->health());
  return out;
}

}  // namespace ocslab::runner
