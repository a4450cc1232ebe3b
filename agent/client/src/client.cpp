#include "ocslab/agent/client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/log.h"
#include "ocslab/ocsctl/errors.h"
#include "ocslab/ocsctl/ssh_session.h"

namespace ocslab::agent {

using nlohmann::json;

AgentClient::AgentClient(std::unique_ptr<ocs::Stream> stream, std::chrono::milliseconds timeout)
    : stream_(std::move(stream)), timeout_(timeout) {}

AgentClient::~AgentClient() { close(); }

void AgentClient::close() {
  if (stream_) {
    stream_->close();
    stream_.reset();
  }
}

json AgentClient::read_message(ocs::Deadline deadline, bool* timed_out) {
  *timed_out = false;
  for (;;) {
    while (auto line = reader_.next()) {
      if (line->too_long)
        throw ProtocolError("agent sent a line longer than " + std::to_string(kMaxLineBytes) + " bytes");
      if (line->text.empty()) continue;
      json m = parse_message(line->text);
      if (m["type"] == "sample") {
        SeqSample s = parse_sample(m);
        if (s.seq > last_seq_) last_seq_ = s.seq;
        if (on_sample_) on_sample_(s);
        continue;
      }
      return m;
    }
    if (!stream_) throw ocs::ConnectionError("agent session is closed");
    // A stream gives what it has even past the deadline, so one that never runs dry (a backlog
    // of samples) would keep poll_for, and the reader thread of a runner that wants to stop,
    // here for as long as it lasts.
    if (ocs::Clock::now() >= deadline) {
      *timed_out = true;
      return {};
    }
    std::string bytes = stream_->read_some(deadline);
    if (bytes.empty()) {
      *timed_out = true;
      return {};
    }
    last_bytes_ = ocs::Clock::now();
    reader_.feed(bytes);
  }
}

json AgentClient::request(Request r) {
  if (!stream_) throw ocs::ConnectionError("agent session is closed");
  r.id = next_id_++;
  stream_->write(request_line(r));
  const auto sent = ocs::Clock::now();
  const auto cap = sent + kBacklogWaitFactor * timeout_;
  auto deadline = sent + timeout_;
  for (;;) {
    bool timed_out = false;
    json m = read_message(deadline, &timed_out);
    if (timed_out) {
      // The reply queues behind the samples sent before it: while they keep arriving (a backlog
      // a saturated runner is still draining, as at probes.stop on a hundred hosts) the agent
      // is answering, so the timeout counts its silence, up to the cap in all.
      const auto now = ocs::Clock::now();
      if (now - last_bytes_ < timeout_ && now < cap) {
        deadline = std::min(last_bytes_ + timeout_, cap);
        continue;
      }
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - sent).count();
      throw ocs::TimeoutError(std::string("no reply to ") + to_string(r.type) + " from " + describe() + " within " +
                              std::to_string(timeout_.count()) + " ms" +
                              (now >= cap ? " (samples kept coming ahead of it for " + std::to_string(waited) +
                                                " ms, the most a reply waits behind them)"
                                          : std::string()));
    }
    if (m.value("id", json()) != r.id) {
      if (m["type"] == "error") spdlog::warn("{}: agent error: {}", describe(), m.value("message", ""));
      continue;  // a reply to nothing we wait for (an error about an over-long line)
    }
    if (m["type"] == "error") {
      throw AgentError(std::string(to_string(r.type)) + " refused by " + describe() + ": " + m.value("message", "?"));
    }
    if (m["type"] != to_string(r.type)) {
      throw ProtocolError(std::string("reply of type ") + m["type"].dump() + " to " + to_string(r.type));
    }
    return m;
  }
}

HelloInfo AgentClient::hello() {
  Request r;
  r.type = RequestType::kHello;
  r.version = kProtocolVersion;
  json m = request(r);
  try {
    HelloInfo h;
    h.version = m.at("version").get<int>();
    h.host = m.at("host").get<std::string>();
    h.pid = m.at("pid").get<long long>();
    h.probes = m.at("probes").get<std::vector<std::string>>();
    if (m.contains("clock_sync")) h.clock_sync = m["clock_sync"].value("text", "");
    return h;
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("malformed hello reply: ") + e.what() + ": " + m.dump());
  }
}

ClockEstimate AgentClient::estimate_clock(int exchanges) {
  ClockEstimate best;
  best.rtt_ns = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < exchanges; ++i) {
    Request r;
    r.type = RequestType::kClock;
    r.t1 = realtime_ns();
    json m = request(r);
    int64_t t4 = realtime_ns();
    int64_t t1 = m.at("t1").get<int64_t>(), t2 = m.at("t2").get<int64_t>(), t3 = m.at("t3").get<int64_t>();
    if (t1 != r.t1)
      throw ProtocolError("clock reply echoes t1 " + std::to_string(t1) + ", sent " + std::to_string(r.t1));
    // Round trip without the agent's own processing time.
    int64_t rtt = (t4 - t1) - (t3 - t2);
    if (rtt < 0) rtt = 0;
    if (rtt < best.rtt_ns) {
      best.rtt_ns = rtt;
      best.offset_ns = ((t2 - t1) + (t3 - t4)) / 2;
      best.uncertainty_ns = rtt / 2;
    }
    best.exchanges = i + 1;
  }
  return best;
}

StartResult AgentClient::start(const std::vector<ProbeRequest>& probes, const std::string& run) {
  Request r;
  r.type = RequestType::kProbesStart;
  r.probes = probes;
  r.run = run;
  json m = request(r);
  StartResult out;
  out.capture = m.value("capture", "");
  out.spool = m.value("spool", "");
  for (const auto& p : m.value("probes", json::array())) {
    out.probes.push_back(
        {p.value("name", ""), p.value("available", false), p.value("method", ""), p.value("reason", "")});
  }
  return out;
}

uint64_t AgentClient::stop() {
  Request r;
  r.type = RequestType::kProbesStop;
  return request(r).value("last_seq", uint64_t{0});
}

json AgentClient::status() {
  Request r;
  r.type = RequestType::kStatus;
  return request(r);
}

FetchResult AgentClient::fetch(uint64_t from_seq, bool follow, uint64_t page_size) {
  if (page_size > kMaxFetchPage) {
    throw Error("fetch page size " + std::to_string(page_size) + " is above the agent's limit of " +
                std::to_string(kMaxFetchPage));
  }
  FetchResult out;
  out.from_seq = from_seq;
  Request r;
  r.type = RequestType::kSpoolFetch;
  r.from_seq = from_seq;
  r.follow = follow;
  r.max_count = page_size;
  for (;;) {
    json m;
    try {
      m = request(r);
    } catch (const AgentError& e) {
      // An agent from before paging refuses the key: the whole gap in one request then.
      if (r.max_count == 0 || std::string(e.what()).find("unknown key 'max_count'") == std::string::npos) throw;
      spdlog::warn("{}: the agent does not page spool.fetch; fetching from seq {} in one request", describe(),
                   r.from_seq);
      r.max_count = 0;
      continue;
    }
    ++out.pages;
    out.count += m.value("count", uint64_t{0});
    out.last_seq = m.value("last_seq", uint64_t{0});
    out.next_seq = m.value("next_seq", out.last_seq + 1);
    out.following = m.value("following", follow);
    if (r.max_count == 0 || !m.value("more", false)) break;
    if (out.next_seq <= r.from_seq) {
      throw ProtocolError("spool.fetch page from seq " + std::to_string(r.from_seq) + " ends at next_seq " +
                          std::to_string(out.next_seq) + ": it does not advance");
    }
    r.from_seq = out.next_seq;
  }
  return out;
}

bool AgentClient::delete_spool(const std::string& capture) {
  Request r;
  r.type = RequestType::kSpoolDelete;
  r.capture = capture;
  return request(r).value("deleted", false);
}

void AgentClient::bye() {
  Request r;
  r.type = RequestType::kBye;
  request(r);
}

size_t AgentClient::poll_for(std::chrono::milliseconds duration) {
  auto deadline = ocs::Clock::now() + duration;
  size_t count = 0;
  auto cb = on_sample_;
  on_sample_ = [&](const SeqSample& s) {
    ++count;
    if (cb) cb(s);
  };
  try {
    for (;;) {
      bool timed_out = false;
      json m = read_message(deadline, &timed_out);
      if (timed_out) break;
      if (m["type"] == "error") spdlog::warn("{}: agent error: {}", describe(), m.value("message", ""));
    }
  } catch (...) {
    on_sample_ = cb;
    throw;
  }
  on_sample_ = cb;
  return count;
}

namespace {

class ChildStream final : public ocs::Stream {
 public:
  explicit ChildStream(const std::vector<std::string>& argv) : what_("local " + argv.at(0)) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw SystemError("pipe", errno);
    }
    pid_ = ::fork();
    if (pid_ < 0) {
      int e = errno;
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      throw SystemError("fork for " + argv[0], e);
    }
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~ChildStream() override { close(); }

  void write(std::string_view data) override {
    if (to_child_ < 0) throw ocs::ConnectionError(what_ + " is closed");
    while (!data.empty()) {
      ssize_t n = ::write(to_child_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw ocs::ConnectionError("write to " + what_ + " failed: " + std::strerror(errno));
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string read_some(ocs::Deadline deadline) override {
    if (from_child_ < 0) throw ocs::ConnectionError(what_ + " is closed");
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - ocs::Clock::now()).count();
      pollfd p{from_child_, POLLIN, 0};
      int rc = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) throw SystemError("poll " + what_, errno);
      if (rc == 0) return {};
      char buf[65536];
      ssize_t n = ::read(from_child_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw ocs::ConnectionError("read from " + what_ + " failed: " + std::strerror(errno));
      if (n == 0) throw ocs::ConnectionError("connection closed by " + what_);
      return std::string(buf, static_cast<size_t>(n));
    }
  }

  void close() override {
    if (to_child_ >= 0) ::close(to_child_);  // EOF: the agent ends its session cleanly
    to_child_ = -1;
    if (from_child_ >= 0) ::close(from_child_);
    from_child_ = -1;
    if (pid_ > 0) {
      // Give it a moment to stop its probes and finish its spool, then insist.
      for (int i = 0; i < 200; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
          pid_ = -1;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  std::string describe() const override { return what_; }

 private:
  std::string what_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
};

}  // namespace

std::unique_ptr<ocs::Stream> ssh_exec(const ocs::SshOptions& options, const std::string& command) {
  ocs::SshOptions o = options;
  o.command = command;
  return ocs::ssh_open(o);
}

std::unique_ptr<ocs::Stream> spawn_stream(const std::vector<std::string>& argv) {
  return std::make_unique<ChildStream>(argv);
}

}  // namespace ocslab::agent
