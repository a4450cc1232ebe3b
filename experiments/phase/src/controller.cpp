#include "ocslab/phase/controller.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "ocslab/common/error.h"
#include "ocslab/common/frame_limits.h"
#include "ocslab/common/log.h"
#include "ocslab/phase/controller_core.h"

namespace ocslab::phase {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Session;

// The Asio side of the controller: the listener, one Session per connection, a strand per rail
// on a worker pool, and the ack timers. Everything it learns goes to the ControllerCore, and
// everything the core asks for (CoreActions) is done here, on the event-loop thread.
struct Controller::Impl : CoreActions {
  explicit Impl(ControllerOptions o) : opt(std::move(o)), workers(std::max<size_t>(1, opt.rails.size())) {}

  void start();
  void stop();
  void accept();
  void on_closed(Session& s, const std::string& reason);
  std::shared_ptr<Session> find(ConnId c) const;

  // CoreActions (event-loop thread).
  void send(ConnId c, const Message& m) override;
  void close(ConnId c) override;
  void close_after_send(ConnId c) override;
  void reprogram(size_t rail) override;
  void arm_timer(uint64_t reconfig, size_t rail, int attempt, std::chrono::milliseconds after) override;
  void cancel_timer(uint64_t reconfig, size_t rail) override;
  void build_ring(size_t rail) override;
  void mask(size_t rail, int port) override;

  ControllerOptions opt;
  std::unique_ptr<ControllerCore> core;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{io};
  std::thread loop;
  asio::thread_pool workers;
  std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
  int bound_port = 0;
  bool started = false;
  std::atomic<bool> stopped{false};  // read by port_failed's callers' threads
  std::map<ConnId, std::shared_ptr<Session>> sessions;
  ConnId next_conn = 0;
  size_t dropped_at_limit = 0;
  std::map<std::pair<uint64_t, size_t>, std::unique_ptr<asio::steady_timer>> timers;
};

struct Session : std::enable_shared_from_this<Session> {
  Session(Controller::Impl& c, ConnId i, tcp::socket s)
      : ctl(c), id(i), sock(std::move(s)), lines(kMaxLine), deadline(ctl.io) {
    boost::system::error_code ec;
    auto ep = sock.remote_endpoint(ec);
    peer = ec ? "?" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
    sock.set_option(tcp::no_delay(true), ec);
    sock.non_blocking(true, ec);  // send() writes directly; the async operations work either way
  }
  // Until it joined, the whole connection has one deadline: the hello must be in by then.
  void start() {
    arm(ctl.opt.hello_timeout,
        fmt::format("no accepted hello within {} ms of connecting", ctl.opt.hello_timeout.count()));
    read();
  }
  void read() {
    sock.async_read_some(asio::buffer(chunk), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
      // A read that completed just before we closed the session (controller stopping) still
      // runs its handler: its lines belong to a session that no longer exists.
      if (self->closed) return;
      if (ec) {
        self->close(ec.message());
        return;
      }
      if (!self->lines.feed(std::string_view(self->chunk.data(), n))) {
        self->close(fmt::format("line longer than {} bytes", kMaxLine));
        return;
      }
      while (auto line = self->lines.next_line()) {
        self->ctl.core->on_line(self->id, *line);
        if (self->closed || self->close_after_write) return;  // refused: read nothing more from it
      }
      self->pace();
      self->read();
    });
  }
  // Once joined: a line's deadline starts with its first byte and ends the line_timeout later,
  // whatever arrives in between; no deadline while no line is in progress.
  void pace() {
    if (!ctl.core->joined(id)) return;  // still the hello deadline
    if (!joined) {                      // just joined: the hello deadline is met, lines get their own from now on
      joined = true;
      disarm();
    }
    if (!lines.partial()) {
      disarm();
    } else if (!armed) {
      arm(ctl.opt.line_timeout,
          fmt::format("a line still incomplete {} ms after its first byte", ctl.opt.line_timeout.count()));
    }
  }
  void arm(std::chrono::milliseconds after, std::string why) {
    armed = true;
    const uint64_t gen = ++generation;
    deadline.expires_after(after);
    deadline.async_wait([self = shared_from_this(), gen, why = std::move(why)](boost::system::error_code ec) {
      if (ec || self->closed || gen != self->generation) return;
      self->close(why);
    });
  }
  void disarm() {
    if (!armed) return;
    armed = false;
    ++generation;
    deadline.cancel();
  }
  // Most lines go out at once: one non-blocking send, with no queue, handler or allocation.
  // Whatever the socket does not take waits in outq, in order, for one gathering async write.
  void send(const Message& m) {
    if (closed) return;
    std::string line = encode(m);
    line += '\n';
    if (writing) {
      queue_line(std::move(line));
      return;
    }
    boost::system::error_code ec;
    const size_t n = sock.write_some(asio::buffer(line), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
      // Not from inside the core's call: it may be walking its ranks.
      asio::post(ctl.io, [self = shared_from_this(), why = ec.message()] { self->close(why); });
      return;
    }
    if (n == line.size()) return;
    queue_line(line.substr(n));
    if (!outq.empty()) write();
  }
  // A rank that never reads would grow outq without end: past kMaxQueuedBytes it is closed
  // (later, not inside the core's call) and its lines dropped; the other ranks go on.
  void queue_line(std::string line) {
    if (outq_bytes + line.size() > kMaxQueuedBytes) {
      if (!dropping) {
        dropping = true;
        asio::post(ctl.io, [self = shared_from_this(), n = outq_bytes] {
          self->close(fmt::format("read nothing of its last {} bytes of replies", n));
        });
      }
      return;
    }
    outq_bytes += line.size();
    outq.push_back(std::move(line));
  }
  // Everything queued so far in one async_write; what was queued meanwhile goes next.
  void write() {
    writing = true;
    std::vector<asio::const_buffer> bufs;
    for (const auto& s : outq) bufs.push_back(asio::buffer(s));
    asio::async_write(sock, bufs, [self = shared_from_this(), k = outq.size()](boost::system::error_code ec, size_t) {
      self->writing = false;
      if (ec) {
        self->close(ec.message());
        return;
      }
      for (size_t i = 0; i < k; ++i) self->outq_bytes -= self->outq[i].size();
      self->outq.erase(self->outq.begin(), self->outq.begin() + static_cast<std::ptrdiff_t>(k));
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
    disarm();
    boost::system::error_code ec;
    sock.shutdown(tcp::socket::shutdown_both, ec);
    sock.close(ec);
    ctl.on_closed(*this, reason);
  }

  Controller::Impl& ctl;
  ConnId id;
  tcp::socket sock;
  std::array<char, 4096> chunk{};
  LineAssembler lines;
  asio::steady_timer deadline;
  bool armed = false;
  bool joined = false;
  uint64_t generation = 0;
  static constexpr size_t kMaxQueuedBytes = 16 << 20;  // outq's bound: 256 lines of the 64 KiB limit
  std::deque<std::string> outq;                        // lines (or a line's rest) the socket has not taken yet
  size_t outq_bytes = 0;                               // in outq
  bool dropping = false;                               // outq overflowed: a close is posted
  bool writing = false;                                // an async_write of outq's first lines is under way
  std::string peer;
  bool closed = false;
  bool ours = false;  // closed by the controller (stopping), not a rank failure
  bool close_after_write = false;
};

void Controller::Impl::start() {
  const auto& L = opt.layout;
  L.validate();
  if (opt.rails.empty()) throw Error(fmt::format("controller {}: no rails", L.job));
  CoreConfig cc;
  cc.layout = L;
  cc.ack_timeout = opt.ack_timeout;
  cc.max_retries = opt.max_retries;
  for (const auto& rail : opt.rails) {
    auto t = rail->topology(L.job);  // throws when the job is not placed on the rail
    cc.rails.push_back(rail->rail());
    cc.initial.push_back(t ? *t : TopoId::uniform(L, 0));
    strands.push_back(asio::make_strand(workers.get_executor()));
  }
  cc.token = opt.token;
  cc.policy = opt.policy;
  cc.windows = opt.windows;
  cc.switch_time = opt.switch_time;
  cc.on_event = opt.on_event;
  boost::system::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(opt.listen_host, ec), static_cast<unsigned short>(opt.listen_port));
  if (ec) throw Error(fmt::format("controller {}: bad listen address '{}': {}", L.job, opt.listen_host, ec.message()));
  if (opt.token.empty() && !ep.address().is_loopback()) {
    throw Error(fmt::format(
        "controller {}: refusing to listen on {} without a token: anyone who reaches it could reconfigure the "
        "switch (set token_file: in the controller's file, or listen on 127.0.0.1)",
        L.job, opt.listen_host));
  }
  core = std::make_unique<ControllerCore>(std::move(cc), *this);
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
    core->cancel_timers();
    auto all = sessions;
    for (const auto& [id, s] : all) {
      s->ours = true;  // our own close, not a rank failure
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
    size_t strangers = 0;
    for (const auto& [id, s] : sessions) strangers += core->joined(id) ? 0 : 1;
    if (strangers >= opt.max_strangers) {
      boost::system::error_code ignored;
      sock.close(ignored);  // no session, no core input: it cannot reach the switch
      if (++dropped_at_limit == 1)
        spdlog::warn("controller {}: {} connections have not joined; closing further ones until they do",
                     opt.layout.job, strangers);
      accept();
      return;
    }
    auto s = std::make_shared<Session>(*this, ++next_conn, std::move(sock));
    sessions[s->id] = s;
    core->opened(s->id, s->peer);
    s->start();
    accept();
  });
}

void Controller::Impl::on_closed(Session& s, const std::string& reason) {
  auto keep = find(s.id);  // the session lives until this returns
  sessions.erase(s.id);
  core->closed(s.id, reason, s.ours);
}

std::shared_ptr<Session> Controller::Impl::find(ConnId c) const {
  auto it = sessions.find(c);
  return it == sessions.end() ? nullptr : it->second;
}

void Controller::Impl::send(ConnId c, const Message& m) {
  auto it = sessions.find(c);  // no shared_ptr copy: this runs for every ACK
  if (it != sessions.end()) it->second->send(m);
}

void Controller::Impl::close(ConnId c) {
  if (auto s = find(c)) s->close("bye");
}

void Controller::Impl::close_after_send(ConnId c) {
  auto s = find(c);
  if (!s) return;
  s->close_after_write = true;
  // Written already: close once the core's call returned, as a write's completion would.
  if (!s->writing) asio::post(io, [s] { s->close("closed by the controller"); });
}

void Controller::Impl::reprogram(size_t k) {
  auto orch = opt.rails[k];
  asio::post(strands[k], [this, orch, k] {
    auto [t, v] = core->intended(k);  // the newest intention when the work runs
    try {
      auto report = opt.policy == Policy::kGreedy ? orch->allocate_topology(opt.layout.job, t, opt.allocator).reconfig
                                                  : orch->set_topology(opt.layout.job, t);
      if (report.changed() && opt.injected_switch_time.count() > 0)
        std::this_thread::sleep_for(opt.injected_switch_time);
      if (opt.on_reprogram) opt.on_reprogram(report);
      asio::post(io, [this, k, v = v, t = t] { core->on_rail_result(k, v, true, {}, t); });
    } catch (const std::exception& ex) {
      asio::post(io,
                 [this, k, v = v, t = t, err = std::string(ex.what())] { core->on_rail_result(k, v, false, err, t); });
    }
  });
}

void Controller::Impl::arm_timer(uint64_t id, size_t k, int attempt, std::chrono::milliseconds after) {
  auto& slot = timers[{id, k}];
  slot = std::make_unique<asio::steady_timer>(io, after);  // replaces (and so cancels) an earlier attempt's
  auto* timer = slot.get();
  timer->async_wait([this, id, k, attempt, timer](boost::system::error_code ec) {
    if (ec) return;
    auto it = timers.find({id, k});
    if (it != timers.end() && it->second.get() == timer) timers.erase(it);
    core->on_timeout(id, k, attempt);
  });
}

void Controller::Impl::cancel_timer(uint64_t id, size_t k) {
  auto it = timers.find({id, k});
  if (it == timers.end()) return;
  it->second->cancel();
  timers.erase(it);
}

void Controller::Impl::build_ring(size_t k) {
  auto orch = opt.rails[k];
  asio::post(strands[k], [this, orch, k] {
    std::string err;
    try {
      orch->set_giant_ring(opt.layout.job);
    } catch (const std::exception& ex) {
      err = ex.what();
    }
    asio::post(io, [this, k, err] { core->on_ring_result(k, err); });
  });
}

void Controller::Impl::mask(size_t k, int port) {
  auto orch = opt.rails[k];
  asio::post(strands[k], [this, orch, k, port] {
    MaskOutcome o;
    try {
      auto m = orch->mask_port(static_cast<ocs::Port>(port));
      if (m.reapplied && opt.on_reprogram) opt.on_reprogram(*m.reapplied);
      if (opt.on_mask) opt.on_mask(orch->rail(), m);
      if (m.from && m.to) {
        o.rank = m.rank;
        o.from = *m.from;
        o.to = *m.to;
      }
    } catch (const std::exception& ex) {
      o.error = ex.what();
    }
    asio::post(io, [this, k, port, o] { core->on_mask_result(k, port, o); });
  });
}

void Controller::port_failed(const std::string& rail, int port, std::string evidence, int64_t seen_mono_ns) {
  auto& im = *impl_;
  size_t k = 0;
  while (k < im.opt.rails.size() && im.opt.rails[k]->rail() != rail) ++k;
  if (k == im.opt.rails.size()) throw Error(fmt::format("controller: no rail named '{}'", rail));
  if (!im.core || !im.started) throw Error("controller: port_failed before start()");
  if (im.stopped) return;
  if (seen_mono_ns == 0) seen_mono_ns = now().monotonic_ns;
  asio::post(im.io, [&im, k, port, ev = std::move(evidence), seen_mono_ns] {
    if (!im.stopped) im.core->on_port_failed(k, port, ev, seen_mono_ns);
  });
}

Controller::Controller(ControllerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Controller::~Controller() { stop(); }
void Controller::start() { impl_->start(); }
void Controller::stop() { impl_->stop(); }
int Controller::port() const { return impl_->bound_port; }

std::vector<ControllerEvent> Controller::events() const {
  return impl_->core ? impl_->core->events() : std::vector<ControllerEvent>{};
}
std::vector<std::string> Controller::problems() const {
  return impl_->core ? impl_->core->problems() : std::vector<std::string>{};
}
bool Controller::in_fallback() const { return impl_->core && impl_->core->in_fallback(); }
size_t Controller::declined() const { return impl_->core ? impl_->core->declined() : 0; }

}  // namespace ocslab::phase
