#include "ocslab/probes/firmware_probe.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <poll.h>
#include <unistd.h>

#if OCSLAB_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "ocslab/common/clock.h"
#include "ocslab/common/log.h"

namespace ocslab::probes {

// ---- QUERY_VPORT_STATE encoding ----

FirmwareCommandError::FirmwareCommandError(uint16_t opcode, uint8_t status, uint32_t syndrome)
    : Error(
          fmt::format("firmware command 0x{:x} failed: status 0x{:02x}, syndrome 0x{:08x}", opcode, status, syndrome)),
      status_(status),
      syndrome_(syndrome) {}

std::array<uint8_t, kQueryVportStateInLen> encode_query_vport_state(const VportStateQuery& q) {
  std::array<uint8_t, kQueryVportStateInLen> in{};
  // PRM layouts are big-endian; uid (bytes 2-3) stays 0: the kernel fills in the DevX uid.
  in[0] = static_cast<uint8_t>(kQueryVportStateOpcode >> 8);
  in[1] = static_cast<uint8_t>(kQueryVportStateOpcode & 0xff);
  auto op_mod = static_cast<uint16_t>(q.op_mod);
  in[6] = static_cast<uint8_t>(op_mod >> 8);
  in[7] = static_cast<uint8_t>(op_mod & 0xff);
  in[8] = q.other_vport ? 0x80 : 0x00;
  in[10] = static_cast<uint8_t>(q.vport_number >> 8);
  in[11] = static_cast<uint8_t>(q.vport_number & 0xff);
  return in;
}

VportState decode_query_vport_state(std::span<const uint8_t> out) {
  // Length before status: an error reply is still 16 bytes, so a shorter one is not a reply to
  // this command at all and nothing in it (not even the status byte) can be trusted.
  if (out.size() < kQueryVportStateOutLen) {
    throw FirmwareReplyError(
        fmt::format("QUERY_VPORT_STATE reply is {} bytes, expected {}", out.size(), kQueryVportStateOutLen));
  }
  uint8_t status = out[0];
  if (status != 0) {
    uint32_t syndrome = (uint32_t{out[4]} << 24) | (uint32_t{out[5]} << 16) | (uint32_t{out[6]} << 8) | out[7];
    throw FirmwareCommandError(kQueryVportStateOpcode, status, syndrome);
  }
  return VportState{static_cast<uint8_t>(out[15] & 0x0f), static_cast<uint8_t>(out[15] >> 4)};
}

std::string to_string(VportOpMod m) {
  switch (m) {
    case VportOpMod::kVnic:
      return "vnic";
    case VportOpMod::kEswitchVport:
      return "eswitch";
    case VportOpMod::kUplink:
      return "uplink";
  }
  return fmt::format("op_mod {}", static_cast<unsigned>(m));
}

VportOpMod parse_vport_op_mod(const std::string& s) {
  if (s == "vnic") return VportOpMod::kVnic;
  if (s == "eswitch") return VportOpMod::kEswitchVport;
  if (s == "uplink") return VportOpMod::kUplink;
  throw Error("vport op_mod must be vnic, eswitch or uplink, got '" + s + "'");
}

// ---- DevX event records ----

std::optional<bool> PortChangeEvent::link() const {
  if (subtype == static_cast<uint8_t>(PortChangeSubtype::kActive)) return true;
  if (subtype == static_cast<uint8_t>(PortChangeSubtype::kDown)) return false;
  return std::nullopt;
}

std::optional<PortChangeEvent> decode_devx_event(std::span<const uint8_t> record) {
  // The kernel always copies the whole EQE; a shorter record means the reader's buffer (or a
  // replay) cut it, and the type byte alone must not be trusted as an event.
  if (record.size() < kDevxEventRecordLen) {
    throw FirmwareEventError(fmt::format("DevX event record is {} bytes, expected {} (8-byte cookie + 64-byte EQE)",
                                         record.size(), kDevxEventRecordLen));
  }
  std::span<const uint8_t> eqe = record.subspan(kDevxEventHeaderLen, kEqeLen);
  if (eqe[1] != kEventTypePortChange) return std::nullopt;
  PortChangeEvent e;
  std::memcpy(&e.cookie, record.data(), sizeof(e.cookie));  // host order: the kernel's u64
  e.subtype = eqe[3];
  // struct mlx5_eqe_port_state: 8 reserved bytes, then the port in the upper nibble.
  e.port = static_cast<uint8_t>((eqe[32 + 8] >> 4) & 0x0f);
  return e;
}

std::string to_string(PortChangeSubtype s) {
  switch (s) {
    case PortChangeSubtype::kDown:
      return "down";
    case PortChangeSubtype::kActive:
      return "active";
    case PortChangeSubtype::kInitialized:
      return "initialized";
    case PortChangeSubtype::kLid:
      return "lid";
    case PortChangeSubtype::kPkey:
      return "pkey";
    case PortChangeSubtype::kGuid:
      return "guid";
    case PortChangeSubtype::kClientReregister:
      return "client_reregister";
  }
  return fmt::format("subtype {}", static_cast<unsigned>(s));
}

// ---- the real device ----

namespace {

std::string local_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

struct ContextCloser {
  void operator()(ibv_context* c) const {
    if (c) ibv_close_device(c);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, ContextCloser>;

struct DeviceListFree {
  void operator()(ibv_device** l) const {
    if (l) ibv_free_device_list(l);
  }
};

class IbvPortReader : public PortStateReader {
 public:
  IbvPortReader(ContextPtr ctx, std::string device, uint8_t port)
      : ctx_(std::move(ctx)), device_(std::move(device)), port_(port) {}
  PortState query() override {
    ibv_port_attr a{};
    int rc = ibv_query_port(ctx_.get(), port_, &a);
    if (rc != 0) throw SystemError(fmt::format("ibv_query_port {} port {}", device_, port_), rc > 0 ? rc : errno);
    return PortState{static_cast<uint8_t>(a.state), a.phys_state};
  }
  std::string device() const override { return device_; }

 private:
  ContextPtr ctx_;
  std::string device_;
  uint8_t port_;
};

#if OCSLAB_HAVE_MLX5DV
// One DevX context serves the command channel and the event channel: a subscription belongs to
// the context's DevX uid, so the context must outlive both.
using SharedContext = std::shared_ptr<ibv_context>;

class DevxChannel : public FirmwareCommandChannel {
 public:
  DevxChannel(SharedContext ctx, std::string device) : ctx_(std::move(ctx)), device_(std::move(device)) {}
  std::vector<uint8_t> execute(std::span<const uint8_t> in, size_t out_len) override {
    std::vector<uint8_t> out(out_len, 0);
    int rc = mlx5dv_devx_general_cmd(ctx_.get(), in.data(), in.size(), out.data(), out.size());
    // Kernels that report a firmware status as EREMOTEIO still copy the reply out: let the
    // decoder name status and syndrome instead of a bare errno.
    int err = rc > 0 ? rc : (rc < 0 ? errno : 0);
    // A kernel that did not copy the reply leaves status 0 in it: that must not read as "down".
    bool reply_copied = err == EREMOTEIO && out.size() > 0 && out[0] != 0;
    if (err != 0 && !reply_copied) throw SystemError("mlx5dv_devx_general_cmd on " + device_, err);
    return out;
  }
  std::string device() const override { return device_; }

 private:
  SharedContext ctx_;
  std::string device_;
};

struct EventChannelCloser {
  void operator()(mlx5dv_devx_event_channel* c) const {
    if (c) mlx5dv_devx_destroy_event_channel(c);
  }
};

class DevxEventChannel : public FirmwareEventChannel {
 public:
  DevxEventChannel(SharedContext ctx, std::string device, uint8_t port)
      : ctx_(std::move(ctx)), device_(std::move(device)), port_(port) {}

  void subscribe(uint16_t event_type) override {
    errno = 0;
    // Without OMIT_EV_DATA: the EQE (subtype, port) is what the probe needs, and every event
    // is then queued on its own instead of being coalesced per subscription.
    std::unique_ptr<mlx5dv_devx_event_channel, EventChannelCloser> ch(
        mlx5dv_devx_create_event_channel(ctx_.get(), static_cast<mlx5dv_devx_create_event_channel_flags>(0)));
    if (!ch) throw SystemError("mlx5dv_devx_create_event_channel on " + device_, errno != 0 ? errno : EOPNOTSUPP);
    uint16_t events[] = {event_type};
    // obj NULL: PORT_CHANGE is unaffiliated. events_sz is the byte size of the list.
    int rc = mlx5dv_devx_subscribe_devx_event(ch.get(), nullptr, sizeof(events), events, port_);
    if (rc != 0) {
      throw SystemError(fmt::format("mlx5dv_devx_subscribe_devx_event 0x{:02x} on {}", event_type, device_),
                        rc > 0 ? rc : errno);
    }
    // read() then never blocks past the poll() below, so stop() is not held up by a quiet port.
    int flags = ::fcntl(ch->fd, F_GETFL);
    if (flags < 0 || ::fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      throw SystemError("fcntl O_NONBLOCK on the DevX event channel of " + device_, errno);
    }
    ch_ = std::move(ch);
  }

  std::optional<std::vector<uint8_t>> read(std::chrono::milliseconds timeout) override {
    if (!ch_) throw Error("DevX event channel of " + device_ + " read before subscribe");
    pollfd p{ch_->fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n < 0) {
      if (errno == EINTR) return std::nullopt;
      throw SystemError("poll on the DevX event channel of " + device_, errno);
    }
    if (n == 0) return std::nullopt;
    // Room for more than one EQE: a future kernel with a larger record must not fail with EINVAL.
    std::vector<uint8_t> buf(kDevxEventRecordLen * 2, 0);
    auto* hdr = reinterpret_cast<mlx5dv_devx_async_event_hdr*>(buf.data());
    ssize_t got = mlx5dv_devx_get_event(ch_.get(), hdr, buf.size());
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) return std::nullopt;
      // EOVERFLOW: the kernel dropped events (the poll still catches the state up).
      throw SystemError("mlx5dv_devx_get_event on " + device_, errno);
    }
    buf.resize(static_cast<size_t>(got));
    return buf;
  }

  uint8_t port() const override { return port_; }

 private:
  SharedContext ctx_;
  std::string device_;
  uint8_t port_;
  std::unique_ptr<mlx5dv_devx_event_channel, EventChannelCloser> ch_;  // destroyed before ctx_
};
#endif

struct Discovery {
  FirmwareBackends backends;
  std::string devx_reason;  // why DevX is not used (empty when it is)
  std::string unavailable;  // why nothing can be used
};

// Finds the RDMA device whose GID table has an entry on the interface (RoCE) and opens it
// twice: with DevX for the firmware command, and plainly for the ibv_query_port fallback.
Discovery discover(const std::string& ifname) {
  Discovery d;
  unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) {
    d.unavailable = "no network interface '" + ifname + "'";
    return d;
  }
  int n = 0;
  std::unique_ptr<ibv_device*, DeviceListFree> list(ibv_get_device_list(&n));
  if (!list || n == 0) {
    d.unavailable = "no RDMA device on this host (interface " + ifname + ")";
    return d;
  }
  std::string tried;
  for (int i = 0; i < n; ++i) {
    ibv_device* dev = list.get()[i];
    std::string name = ibv_get_device_name(dev);
    tried += (tried.empty() ? "" : ", ") + name;
    ContextPtr ctx(ibv_open_device(dev));
    if (!ctx) continue;
    std::vector<ibv_gid_entry> entries(256);
    ssize_t count = ibv_query_gid_table(ctx.get(), entries.data(), entries.size(), 0);
    std::optional<uint8_t> port;
    for (ssize_t k = 0; k < count && !port; ++k) {
      if (entries[static_cast<size_t>(k)].ndev_ifindex == ifindex) {
        port = static_cast<uint8_t>(entries[static_cast<size_t>(k)].port_num);
      }
    }
    if (!port) continue;
    d.backends.port = std::make_shared<IbvPortReader>(std::move(ctx), name, *port);
#if OCSLAB_HAVE_MLX5DV
    if (!mlx5dv_is_supported(dev)) {
      d.devx_reason = name + " is not an mlx5 device";
    } else {
      mlx5dv_context_attr attr{};
      attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
      errno = 0;
      SharedContext devx(mlx5dv_open_device(dev, &attr), ContextCloser{});
      if (devx) {
        d.backends.devx = std::make_shared<DevxChannel>(devx, name);
        d.backends.events = std::make_shared<DevxEventChannel>(devx, name, *port);
      } else {
        d.devx_reason =
            fmt::format("DevX not permitted on {}: {} (older kernels need CAP_NET_RAW; the firmware must support DevX)",
                        name, std::strerror(errno));
      }
    }
#else
    d.devx_reason = "built without mlx5dv (infiniband/mlx5dv.h / libmlx5 not found at build time)";
#endif
    return d;
  }
  d.unavailable = fmt::format("no RDMA device on interface {} (devices tried: {})", ifname, tried);
  return d;
}

}  // namespace

// ---- the probe ----

FirmwareProbe::FirmwareProbe(FirmwareProbeConfig config, FirmwareBackends backends)
    : config_(std::move(config)), backends_(std::move(backends)) {
  if (config_.host.empty()) config_.host = local_host();
  if (config_.interval.count() <= 0) {
    throw Error(fmt::format("firmware probe interval must be positive, got {} us", config_.interval.count()));
  }
}

FirmwareProbe::~FirmwareProbe() { stop(); }

FirmwareProbe::Reading FirmwareProbe::read() {
  Reading r;
  if (use_devx_) {
    auto in = encode_query_vport_state(config_.query);
    auto out = backends_.devx->execute(in, kQueryVportStateOutLen);
    VportState v = decode_query_vport_state(out);
    r.link = v.up();
    r.admin = v.admin_state;
  } else {
    PortState p = backends_.port->query();
    // phys_state, not state: on InfiniBand a port is ACTIVE only once a subnet manager has
    // configured it, while the physical link (what the switch affects) is up at LinkUp.
    r.link = p.phys_state == 5;
    r.phys_state = p.phys_state;
  }
  return r;
}

void FirmwareProbe::emit_changes(const Reading& r, bool first, std::vector<Sample>& out) {
  Timestamp ts = now();
  auto add = [&](const char* signal, double value, const char* unit) {
    out.push_back(Sample{ts.realtime_ns, ts.monotonic_ns, config_.host, "firmware", subject_, signal, value, unit});
  };
  if (first || r.link != last_->link) add("link", r.link ? 1.0 : 0.0, "bool");
  if (r.admin && (first || r.admin != last_->admin)) add("admin", *r.admin, "vport_admin");
  if (r.phys_state && (first || r.phys_state != last_->phys_state)) add("phys_state", *r.phys_state, "ib_phys_state");
  last_ = r;
}

void FirmwareProbe::emit_event(const PortChangeEvent& e, int64_t t_ns, int64_t mono_ns) {
  auto sample = [&](const char* signal, double value, const char* unit) {
    return Sample{t_ns, mono_ns, config_.host, "firmware", subject_, signal, value, unit};
  };
  std::lock_guard lk(emit_mu_);
  sink_(sample("port_change", e.subtype, "mlx5_port_change"));
  std::optional<bool> link = e.link();
  if (!link) return;
  // Any poll in flight now queried before this event was read: it must not undo it.
  ++event_generation_;
  if (*link != last_->link) {
    last_->link = *link;
    sink_(sample("link", *link ? 1.0 : 0.0, "bool"));
  }
}

ProbeStatus FirmwareProbe::start(SampleSink sink) {
  {
    std::lock_guard lk(mu_);
    if (started_) throw Error("firmware probe on " + config_.interface + " started twice");
    started_ = true;
  }
  ProbeStatus status;
  std::string devx_reason;
  if (!backends_.devx && !backends_.port) {
    Discovery d = discover(config_.interface);
    if (!d.unavailable.empty()) {
      status.reason = d.unavailable;
      return status;
    }
    backends_ = std::move(d.backends);
    devx_reason = d.devx_reason;
  }

  // The first reading decides the method: a DevX query the firmware refuses (an uplink query
  // from a function that is not the eswitch manager) falls back to ibv_query_port.
  std::optional<Reading> first;
  if (backends_.devx) {
    use_devx_ = true;
    subject_ = backends_.devx->device() + "/" + config_.interface;
    try {
      first = read();
      status.method = kFirmwareMethodDevx;
    } catch (const Error& e) {
      devx_reason =
          fmt::format("DevX QUERY_VPORT_STATE ({}, vport {}) failed on {}: {}", to_string(config_.query.op_mod),
                      config_.query.vport_number, config_.interface, e.what());
      use_devx_ = false;
    }
  }
  if (!first && backends_.port) {
    subject_ = backends_.port->device() + "/" + config_.interface;
    try {
      first = read();
      status.method = kFirmwareMethodIbv;
    } catch (const Error& e) {
      status.reason = (devx_reason.empty() ? "" : devx_reason + "; ") + e.what();
      return status;
    }
  }
  if (!first) {
    status.reason = devx_reason.empty() ? "no firmware link-state source for " + config_.interface : devx_reason;
    return status;
  }
  status.available = true;
  if (!use_devx_) status.reason = devx_reason;  // why it fell back, if it did
  // Subscribed after the first reading, so no event can precede the start samples; one that
  // comes in between waits in the channel and is read (and timed) when the event thread runs.
  if (use_devx_ && backends_.events) {
    try {
      backends_.events->subscribe(kEventTypePortChange);
      use_events_ = true;
      status.method = kFirmwareMethodDevxEvents;
    } catch (const Error& e) {
      status.reason = fmt::format("PORT_CHANGE events not available on {} (polling only): {}", subject_, e.what());
    }
  }
  emit_changes(*first, true, first_);

  sink_ = std::move(sink);
  thread_ = std::thread([this] { run(); });
  return status;
}

void FirmwareProbe::run() {
  {
    std::lock_guard lk(emit_mu_);
    for (const auto& s : first_) sink_(s);
    first_.clear();
  }
  // The event thread starts only now: its samples must follow the start samples.
  if (use_events_) events_thread_ = std::thread([this] { run_events(); });
  // A fixed grid from the start: next += interval does not drift with the time each query takes.
  auto next = std::chrono::steady_clock::now() + config_.interval;
  bool failing = false;
  std::vector<Sample> out;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      if (cv_.wait_until(lk, next, [this] { return stop_; })) return;
    }
    out.clear();
    uint64_t generation = 0;
    {
      std::lock_guard lk(emit_mu_);
      generation = event_generation_;
    }
    try {
      Reading r = read();
      if (failing) spdlog::info("firmware: {} readable again", subject_);
      failing = false;
      std::lock_guard lk(emit_mu_);
      // An event read while this query was in flight is newer than the query's answer.
      if (event_generation_ != generation) r.link = last_->link;
      emit_changes(r, false, out);
      for (const auto& s : out) sink_(s);
    } catch (const Error& e) {
      ++failed_polls_;
      // Once per run of failures: at 1 kHz a removed device would otherwise flood the log.
      if (!failing) spdlog::warn("firmware: {}: {}", subject_, e.what());
      failing = true;
    }
    // After a stall (suspended host, slow command) skip the missed ticks instead of bursting.
    next += config_.interval;
    auto t = std::chrono::steady_clock::now();
    if (next < t) next = t + config_.interval;
  }
}

void FirmwareProbe::run_events() {
  // How long one read waits: bounds how late stop() is noticed, not how late an event is seen.
  constexpr auto kReadWait = std::chrono::milliseconds(50);
  uint8_t port = backends_.events->port();
  bool failing = false;
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
    }
    std::optional<std::vector<uint8_t>> record;
    try {
      record = backends_.events->read(kReadWait);
      if (failing) spdlog::info("firmware: {} events readable again", subject_);
      failing = false;
    } catch (const Error& e) {
      ++failed_events_;
      bool again = failing;
      if (!failing) spdlog::warn("firmware: {}: {} (polling continues)", subject_, e.what());
      failing = true;
      // A single failure (EOVERFLOW: the kernel dropped events) is retried at once, so the
      // events still queued are timed without delay; a channel that keeps failing must not
      // spin, and waits as long as a quiet read would.
      if (!again) continue;
      std::unique_lock lk(mu_);
      if (cv_.wait_for(lk, kReadWait, [this] { return stop_; })) return;
      continue;
    }
    if (!record) continue;
    Timestamp ts = now();  // the moment the event was read: the kernel does not time EQEs
    try {
      std::optional<PortChangeEvent> e = decode_devx_event(*record);
      if (!e || e->port != port) continue;
      emit_event(*e, ts.realtime_ns, ts.monotonic_ns);
    } catch (const FirmwareEventError& e) {
      ++failed_events_;
      spdlog::warn("firmware: {}: {}", subject_, e.what());
    }
  }
}

void FirmwareProbe::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Written by thread_ before it waits, so visible after the join.
  if (events_thread_.joinable()) events_thread_.join();
}

}  // namespace ocslab::probes
