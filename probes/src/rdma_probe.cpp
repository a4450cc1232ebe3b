#include "ocslab/probes/rdma_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/probes/outage_tracker.h"
#include "ocslab/probes/rdma_control.h"
#include "ocslab/probes/rdma_counters.h"
#include "ocslab/verbs/verbs.h"

namespace ocslab::probes {

namespace {

constexpr int kRecvSlots = 64;

}  // namespace

struct RdmaProbe::Impl {
  RdmaProbeConfig cfg;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<char> buffer;
  int gid_index = -1;
  ibv_gid gid{};
  std::string device_name;
  uint32_t generation = 0;  // wr_id high half: completions of a destroyed QP are ignored
  uint32_t psn = 0;
  std::mt19937 rng{std::random_device{}()};
  int wake_fd = -1;
  std::unique_ptr<RdmaControlServer> server;   // server: the listening socket, unpaired connections
  std::unique_ptr<RdmaControlConnection> ctl;  // the paired peer's control connection
  SampleSink sink;
  std::string subject;
  std::unique_ptr<RdmaCounters> counters;

  ~Impl() {
    ctl.reset();
    server.reset();
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (channel) ibv_destroy_comp_channel(channel);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void emit(const Timestamp& t, const std::string& signal, double value, const std::string& unit) {
    sink(Sample{t.realtime_ns, t.monotonic_ns, cfg.host, "rdma", subject, signal, value, unit});
  }

  // Emits the counters that changed since the last read ("hw_base." / "pma_base." for a
  // counter's first read); a counter that fails is logged once, the probe goes on.
  void read_counters() {
    if (!counters || counters->empty()) return;
    RdmaCounters::Reading r = counters->read();
    Timestamp t = now();
    for (const auto& e : r.errors) spdlog::warn("RDMA probe {}: hardware counter {}", subject, e);
    for (const auto& c : r.changes) {
      if (c.first) {
        auto dot = c.name.find('.');
        emit(t, c.name.substr(0, dot) + "_base" + c.name.substr(dot), static_cast<double>(c.value), "count");
      } else {
        emit(t, c.name, c.delta, "count");
      }
    }
  }

  // Finds the RDMA device whose port carries a RoCE v2 IPv4-mapped GID on the interface.
  std::string open_device() {
    auto found = verbs::find_roce_device(cfg.interface, cfg.port, cfg.device);
    switch (found.outcome) {
      case verbs::RoceSearch::Outcome::kNoInterface:
        return "no network interface '" + cfg.interface + "'";
      case verbs::RoceSearch::Outcome::kNoDevices:
        return "no RDMA device on this host (interface " + cfg.interface + ")";
      case verbs::RoceSearch::Outcome::kNoGid:
        return fmt::format("no RDMA device with a RoCE v2 IPv4 GID on {} port {} (devices tried: {})", cfg.interface,
                           cfg.port, found.tried.empty() ? "none" : found.tried);
      case verbs::RoceSearch::Outcome::kFound:
        break;
    }
    ctx = found.device.ctx;
    gid_index = found.device.gid_index;
    gid = found.device.gid;
    device_name = found.device.name;
    subject = device_name + "/" + cfg.interface + (cfg.label.empty() ? "" : "@" + cfg.label);
    return {};
  }

  void allocate() {
    pd = ibv_alloc_pd(ctx);
    channel = ibv_create_comp_channel(ctx);
    if (!pd || !channel) throw Error(device_name + ": cannot allocate a protection domain / completion channel");
    cq = ibv_create_cq(ctx, 2 * kRecvSlots + 32, nullptr, channel, 0);
    if (!cq) throw SystemError(device_name + ": ibv_create_cq", errno);
    ::fcntl(channel->fd, F_SETFL, ::fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
    buffer.assign(static_cast<size_t>(kRecvSlots + 1) * cfg.message_bytes, 0);
    // An int, not the enum: verbs.h's ibv_reg_mr macro ANDs it with another enum, which
    // clang rejects under C++20 (-Wdeprecated-enum-enum-conversion).
    const int access = IBV_ACCESS_LOCAL_WRITE;
    mr = ibv_reg_mr(pd, buffer.data(), buffer.size(), access);
    if (!mr) throw SystemError(device_name + ": ibv_reg_mr", errno);
    if (ibv_req_notify_cq(cq, 0) != 0) throw Error(device_name + ": ibv_req_notify_cq failed");
    wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }

  void create_qp() {
    if (qp) ibv_destroy_qp(qp);
    ++generation;
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = kRecvSlots;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.qp_type = IBV_QPT_RC;
    qp = ibv_create_qp(pd, &init);
    if (!qp) throw SystemError(device_name + ": ibv_create_qp", errno);
    if (!verbs::qp_to_init(qp, cfg.port)) throw SystemError(device_name + ": QP to INIT", errno);
    psn = rng() & 0xffffff;
    if (cfg.role == RdmaProbeConfig::Role::kServer) {
      for (int i = 0; i < kRecvSlots; ++i) post_recv(static_cast<uint32_t>(i));
    }
  }

  void connect_qp(const QpInfo& remote) {
    verbs::RtrParams rtr;
    rtr.dest_qpn = remote.qpn;
    rtr.rq_psn = remote.psn;
    rtr.dgid = remote.gid;
    rtr.sgid_index = gid_index;
    rtr.port = cfg.port;
    rtr.mtu = IBV_MTU_1024;
    if (!verbs::qp_to_rtr(qp, rtr)) throw SystemError(device_name + ": QP to RTR", errno);
    verbs::RtsParams rts;
    rts.sq_psn = psn;
    rts.timeout = static_cast<uint8_t>(cfg.timeout);
    rts.retry_cnt = static_cast<uint8_t>(cfg.retry_cnt);
    rts.rnr_retry = static_cast<uint8_t>(cfg.rnr_retry);
    if (!verbs::qp_to_rts(qp, rts)) throw SystemError(device_name + ": QP to RTS", errno);
  }

  QpInfo local() const { return QpInfo{qp->qp_num, psn, gid}; }

  void post_recv(uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buffer.data() + slot * cfg.message_bytes), cfg.message_bytes, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = (static_cast<uint64_t>(generation) << 32) | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(qp, &wr, &bad) != 0) throw SystemError(device_name + ": ibv_post_recv", errno);
  }

  void post_send(uint64_t seq) {
    char* slot = buffer.data() + static_cast<size_t>(kRecvSlots) * cfg.message_bytes;
    std::memcpy(slot, &seq, std::min<size_t>(sizeof(seq), cfg.message_bytes));
    ibv_sge sge{reinterpret_cast<uintptr_t>(slot), cfg.message_bytes, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = (static_cast<uint64_t>(generation) << 32);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp, &wr, &bad) != 0) throw SystemError(device_name + ": ibv_post_send", errno);
  }

  // -- the control connection (management network, rdma_control.h) ---------------------------

  // Client: a connection to the server that has presented the secret, or false (the probe
  // retries). The connect waits at most the control deadline, and not at all once stop() woke us.
  bool client_connect() {
    ctl.reset();
    auto [host, port] = split_control_address(cfg.control);
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return false;
    int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    bool ok = fd >= 0 && (::connect(fd, res->ai_addr, res->ai_addrlen) == 0 || errno == EINPROGRESS);
    freeaddrinfo(res);
    if (ok) {
      pollfd p[2] = {{fd, POLLOUT, 0}, {wake_fd, POLLIN, 0}};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = ::poll(p, 2, static_cast<int>(cfg.control_deadline.count())) > 0 && (p[0].revents & POLLOUT) &&
           ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    if (!ok) {
      if (fd >= 0) ::close(fd);
      return false;
    }
    ctl = std::make_unique<RdmaControlConnection>(fd, BoundedLineReader(fd, cfg.control, kRdmaControlMaxLine),
                                                  cfg.control_deadline);
    ctl->send(auth_line(cfg.secret));
    return true;
  }

  // Client: new QP, our info to the server, its info back (by the control deadline), connect.
  void client_pair() {
    create_qp();
    ctl->send(local().line());
    connect_qp(ctl->read_qp(BoundedLineReader::Clock::now() + cfg.control_deadline, wake_fd));
  }

  void server_listen() {
    RdmaControlServerOptions o;
    o.listen = cfg.control;
    o.any_address = cfg.any_address;
    o.secret = cfg.secret;
    o.deadline = cfg.control_deadline;
    server = std::make_unique<RdmaControlServer>(o);
  }

  // Server: the client's QP -> a fresh QP paired with it, our info back.
  void server_pair(const QpInfo& remote) {
    create_qp();
    connect_qp(remote);
    ctl->send(local().line());
  }
};

RdmaProbe::RdmaProbe(RdmaProbeConfig config) : config_(std::move(config)) {}

RdmaProbe::~RdmaProbe() { stop(); }

// The probe thread: pairs with the peer (again after an error or a lost control connection),
// sends one message per interval (client) and turns completions into stalls, resumes and QP
// errors until stop(). Each step of an iteration is a method; run() names them in order.
struct RdmaProbe::Loop {
  explicit Loop(RdmaProbe& probe)
      : probe(probe),
        m(*probe.impl_),
        server(m.cfg.role == RdmaProbeConfig::Role::kServer),
        interval_ns(static_cast<int64_t>(m.cfg.interval.count()) * 1000),
        outage(now(), m.cfg.outage_factor * static_cast<double>(interval_ns)),
        next_send(monotonic_ns()),
        counter_ns(static_cast<int64_t>(m.cfg.counter_period.count()) * 1'000'000),
        have_counters(m.counters && !m.counters->empty()),
        next_counters(monotonic_ns() + counter_ns) {}

  void run() {
    m.read_counters();  // the baseline
    while (!probe.stop_) {
      read_counters_when_due();
      if (!paired && !pair()) continue;
      if (!send_when_due()) continue;
      pollfd p[3] = {{m.channel->fd, POLLIN, 0}, {m.wake_fd, POLLIN, 0}, {server ? m.ctl->fd() : -1, POLLIN, 0}};
      if (!wait(p)) break;
      if (server && ((p[2].revents & (POLLIN | POLLHUP | POLLERR)) || m.ctl->partial()) && !read_control()) continue;
      if (p[0].revents & POLLIN) ack_cq_event();
      take_completions();
    }
    // An outage still going on when the probe stops: its start is known, its end is not.
    if (auto since = outage.open_outage(now())) m.emit(*since, "stalled", 1, "");
    m.read_counters();
  }

 private:
  // Waits are cut short for the next periodic counter read.
  int64_t until_counters_ns(int64_t wait_ns) const {
    if (!have_counters || counter_ns <= 0) return wait_ns;
    return std::clamp<int64_t>(next_counters - monotonic_ns(), 0, wait_ns);
  }

  void recreated() {
    ++probe.recreated_;
    m.emit(now(), "qp_recreated", m.qp->qp_num, "qpn");
  }

  void setup_failed(const std::exception& e) {
    paired = false;
    m.ctl.reset();
    if (probe.stop_) return;  // stop() cut a wait short: not a setup error
    spdlog::warn("RDMA probe {}: {} (retrying)", m.subject, e.what());
    m.emit(now(), "setup_error", 0, "");
    outage.setup_failed();
  }

  void read_counters_when_due() {
    if (!have_counters) return;
    int64_t mono_now = monotonic_ns();
    // An outage noticed: the counters now, before the retransmissions pile up, so that
    // what moved during it is told apart from what moved before.
    if (outage.outage_noticed(mono_now)) {
      m.read_counters();
      next_counters = monotonic_ns() + counter_ns;
    } else if (counter_ns > 0 && mono_now >= next_counters) {
      m.read_counters();
      next_counters += counter_ns;
      if (next_counters < mono_now) next_counters = mono_now + counter_ns;
    }
  }

  // (Re)establishes the control connection and the QP pair; false when not paired (yet).
  bool pair() {
    try {
      if (server) {
        // Unauthenticated and slow clients are dropped in there without holding this up.
        auto peer =
            m.server->wait_for_peer(std::chrono::milliseconds(until_counters_ns(500'000'000) / 1'000'000), m.wake_fd);
        if (!peer) return false;
        m.ctl = std::move(peer->connection);
        m.server_pair(peer->qp);
      } else {
        if (!m.client_connect()) {
          pollfd p{m.wake_fd, POLLIN, 0};
          ::poll(&p, 1, static_cast<int>(until_counters_ns(500'000'000) / 1'000'000));
          return false;
        }
        m.client_pair();
      }
      paired = true;
      outstanding = false;
      if (server) outage.attempted(now());
      // Any pair after the first is a re-creation: after a QP error the client's in-place
      // re-pair can fail (the server's reply missed the deadline) and come back here over
      // a fresh control connection; the new QP is re-created all the same.
      if (paired_before) recreated();
      paired_before = true;
      return true;
    } catch (const std::exception& e) {
      setup_failed(e);
      return false;
    }
  }

  // Client: one SEND in flight at a time, one per interval. False when the send failed.
  bool send_when_due() {
    int64_t mono = monotonic_ns();
    if (server || outstanding || mono < next_send) return true;
    try {
      m.post_send(++seq);
      outstanding = true;
      outage.attempted(now());
    } catch (const std::exception& e) {
      setup_failed(e);
      return false;
    }
    next_send += interval_ns;
    if (next_send < mono) next_send = mono + interval_ns;
    return true;
  }

  // Until a completion, a wake-up, a control line or the next send or counter read; false on a
  // poll error.
  bool wait(pollfd (&p)[3]) const {
    int64_t wait_ns =
        until_counters_ns((!server && !outstanding) ? std::max<int64_t>(0, next_send - monotonic_ns()) : 50'000'000);
    // A line the client started must be complete by its deadline: woken at least every 50 ms.
    if (server && m.ctl && m.ctl->partial()) wait_ns = std::min<int64_t>(wait_ns, 50'000'000);
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
    return !(::ppoll(p, 3, &ts, nullptr) < 0 && errno != EINTR);
  }

  // Server: the client re-created its QP (after an error) or went away. False when reading its
  // line failed.
  bool read_control() {
    try {
      QpInfo remote;
      auto st = m.ctl->poll_qp(remote);
      if (st == BoundedLineReader::Status::kEof) {
        paired = false;
        m.ctl.reset();
      } else if (st == BoundedLineReader::Status::kLine) {
        m.server_pair(remote);
        recreated();
      }
      return true;
    } catch (const std::exception& e) {
      setup_failed(e);
      return false;
    }
  }

  void ack_cq_event() {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(m.channel, &ev_cq, &ev_ctx) == 0) {
      ibv_ack_cq_events(ev_cq, 1);
      ibv_req_notify_cq(m.cq, 0);
    }
  }

  void take_completions() {
    ibv_wc wc[32];
    int n = ibv_poll_cq(m.cq, 32, wc);
    if (n <= 0) return;
    Timestamp t = now();  // right after the completions were taken
    bool broken = false, resumed = false;
    for (int i = 0; i < n; ++i) {
      if ((wc[i].wr_id >> 32) != m.generation) continue;  // a QP destroyed since
      ++probe.completions_;
      m.emit(t, "completion", wc[i].status, "wc_status");
      if (wc[i].status == IBV_WC_SUCCESS) {
        if (auto r = outage.good_completion(t)) {
          m.emit(r->stalled_at, "stalled", 1, "");
          m.emit(r->resumed_at, "resumed", r->gap_ms, "ms");
          resumed = true;
        }
        if (server) {
          try {
            m.post_recv(static_cast<uint32_t>(wc[i].wr_id & 0xffffffff));
          } catch (const std::exception& e) {
            setup_failed(e);
          }
        } else {
          outstanding = false;
        }
      } else if (!broken) {
        broken = true;
        ++probe.errors_;
        m.emit(t, "qp_error", wc[i].status, "wc_status");
        spdlog::info("RDMA probe {}: QP {} in error: {}", m.subject, m.qp->qp_num, ibv_wc_status_str(wc[i].status));
      }
    }
    if (resumed || broken) m.read_counters();
    if (broken && !server) {
      // The QP is in error: a fresh pair, exchanged over the management network.
      try {
        m.client_pair();
        recreated();
      } catch (const std::exception& e) {
        setup_failed(e);
      }
      outstanding = false;
    }
  }

  RdmaProbe& probe;
  Impl& m;
  const bool server;
  const int64_t interval_ns;
  // When traffic counts as stalled and a completion as a resume (outage_tracker.h).
  OutageTracker outage;
  bool paired = false, outstanding = false;
  uint64_t seq = 0;
  bool paired_before = false;  // a pair after the first is a re-creation
  int64_t next_send;
  const int64_t counter_ns;
  const bool have_counters;
  int64_t next_counters;
};

ProbeStatus RdmaProbe::start(SampleSink sink) {
  if (thread_.joinable()) throw Error("RDMA probe on " + config_.interface + " started twice");
  if (!valid_control_secret(config_.secret))
    return ProbeStatus{false, "",
                       "no control secret (32 to 256 hex digits; the runner passes one per run): the QP exchange "
                       "is authenticated"};
  auto impl = std::make_unique<Impl>();
  impl->cfg = config_;
  impl->sink = std::move(sink);
  std::string why = impl->open_device();
  if (!why.empty()) return ProbeStatus{false, "", why};
  try {
    impl->allocate();
    if (config_.role == RdmaProbeConfig::Role::kServer) impl->server_listen();
  } catch (const Error& e) {
    return ProbeStatus{false, "", e.what()};
  }
  impl->counters =
      std::make_unique<RdmaCounters>(RdmaCounters::port_dir(impl->device_name, config_.port, config_.sysfs_root));
  for (const auto& e : impl->counters->errors()) spdlog::warn("RDMA probe {}: hardware counter {}", impl->subject, e);
  std::string counters_text =
      impl->counters->empty()
          ? fmt::format("; no hardware counters in {}", impl->counters->dir())
          : fmt::format("; {} hardware counters in {} read every {} ms and at stall, resume, QP error",
                        impl->counters->names().size(), impl->counters->dir(), config_.counter_period.count());
  impl_ = std::move(impl);
  std::string method = fmt::format("RC {} on {} GID index {}, {} every {} us, timeout {} retry {} rnr {}",
                                   config_.role == RdmaProbeConfig::Role::kServer ? "RECV" : "SEND", impl_->device_name,
                                   impl_->gid_index, config_.message_bytes, config_.interval.count(), config_.timeout,
                                   config_.retry_cnt, config_.rnr_retry) +
                       counters_text;
  stop_ = false;
  thread_ = std::thread([this] { Loop(*this).run(); });
  return ProbeStatus{true, method, ""};
}

void RdmaProbe::stop() {
  if (thread_.joinable()) {
    stop_ = true;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(impl_->wake_fd, &one, sizeof(one));
    thread_.join();
  }
  impl_.reset();
}

}  // namespace ocslab::probes
