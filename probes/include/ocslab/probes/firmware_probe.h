// The firmware link-state probe: polls the NIC firmware's own view of one interface's link
// (mlx5 DevX QUERY_VPORT_STATE on ConnectX; ibv_query_port on any other RDMA NIC), so a
// timeline shows when the firmware, not only the kernel, considers the link up after a switch
// reconfiguration (with auto-negotiation that is seconds after the light returns).
//
// Samples (source "firmware", subject "<device>/<interface>"), once at start and then only on
// change; t_ns / mono_ns are taken right after the query (or the event read) that saw the new
// value returns:
//   link        1 up / 0 down, unit "bool"; from whichever of poll and PORT_CHANGE event saw
//               the change first (the other does not repeat it)
//   port_change DevX events only: one per PORT_CHANGE event read for the interface's port, value
//               the PRM subtype (1 down, 4 active, 5 initialized, ...), unit "mlx5_port_change"
//   admin       DevX only: the vport's admin_state (PRM: 0 down, 1 up, 2 follow), unit "vport_admin"
//   phys_state  ibv_query_port only: IB physical port state (5 LinkUp, 2 Polling, 3 Disabled),
//               unit "ib_phys_state"
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/probes/probe.h"

namespace ocslab::probes {

// ---- mlx5 firmware command QUERY_VPORT_STATE (docs/protocols.md#mlx5-firmware-link-state) ----

constexpr uint16_t kQueryVportStateOpcode = 0x750;
constexpr size_t kQueryVportStateInLen = 16;
constexpr size_t kQueryVportStateOutLen = 16;

// op_mod of QUERY_VPORT_STATE: whose state is asked for.
enum class VportOpMod : uint16_t { kVnic = 0, kEswitchVport = 1, kUplink = 2 };

struct VportStateQuery {
  VportOpMod op_mod = VportOpMod::kVnic;
  bool other_vport = false;  // ask for vport_number instead of the caller's own vport (eswitch manager only)
  uint16_t vport_number = 0;
};

struct VportState {
  uint8_t state = 0;        // 0 down, 1 up
  uint8_t admin_state = 0;  // 0 down, 1 up, 2 follow (the uplink)
  bool up() const { return state == 1; }
};

// The firmware answered with a non-zero status (bad parameter, not permitted for this vport...).
class FirmwareCommandError : public Error {
 public:
  FirmwareCommandError(uint16_t opcode, uint8_t status, uint32_t syndrome);
  uint8_t status() const { return status_; }
  uint32_t syndrome() const { return syndrome_; }

 private:
  uint8_t status_;
  uint32_t syndrome_;
};

// The reply is not a QUERY_VPORT_STATE output (too short).
class FirmwareReplyError : public Error {
 public:
  using Error::Error;
};

std::array<uint8_t, kQueryVportStateInLen> encode_query_vport_state(const VportStateQuery& q);
// Throws FirmwareCommandError for a non-zero status, FirmwareReplyError for a short reply.
VportState decode_query_vport_state(std::span<const uint8_t> out);

// "vnic" / "eswitch" / "uplink"; parse throws Error naming the value.
std::string to_string(VportOpMod m);
VportOpMod parse_vport_op_mod(const std::string& s);

// ---- mlx5 asynchronous events read from a DevX event channel ----
//
// mlx5dv_devx_get_event() hands back one record per event: struct mlx5dv_devx_async_event_hdr
// (the u64 cookie given at subscription, host byte order) followed by the 64-byte EQE the
// firmware wrote (struct mlx5_eqe: type at byte 1, sub_type at byte 3, event data at bytes
// 32-59). Sources: Linux drivers/infiniband/hw/mlx5/devx.c (deliver_event copies
// sizeof(struct mlx5_eqe) after the cookie; devx_async_event_read returns 8 + 64 bytes, EINVAL
// for a smaller buffer, EOVERFLOW after the kernel dropped events) and include/linux/mlx5/device.h
// (MLX5_EVENT_TYPE_PORT_CHANGE 0x09, MLX5_PORT_CHANGE_SUBTYPE_*, struct mlx5_eqe_port_state:
// port number in the upper nibble of data byte 8, read as (port >> 4) & 0xf by mlx5_ib's
// handle_port_change). PORT_CHANGE is an unaffiliated event (subscribed with no object) that
// devx.c accepts as a legacy one (is_legacy_unaffiliated_event_num).

constexpr uint16_t kEventTypePortChange = 0x09;
constexpr size_t kEqeLen = 64;
constexpr size_t kDevxEventHeaderLen = 8;  // the cookie
constexpr size_t kDevxEventRecordLen = kDevxEventHeaderLen + kEqeLen;

// PORT_CHANGE sub_type (MLX5_PORT_CHANGE_SUBTYPE_*).
enum class PortChangeSubtype : uint8_t {
  kDown = 1,
  kActive = 4,
  kInitialized = 5,
  kLid = 6,
  kPkey = 7,
  kGuid = 8,
  kClientReregister = 9,
};

struct PortChangeEvent {
  uint64_t cookie = 0;
  uint8_t subtype = 0;  // PortChangeSubtype; other values are passed through, not refused
  uint8_t port = 0;     // 1-based device port, as ibv ports are numbered
  // What the event says about the link: 1 up (ACTIVE), 0 down (DOWN), nothing for the others.
  std::optional<bool> link() const;
};

// The record is not an event record (shorter than cookie + EQE).
class FirmwareEventError : public Error {
 public:
  using Error::Error;
};

// Decodes one record as mlx5dv_devx_get_event returns it. A PORT_CHANGE EQE gives the event;
// an EQE of any other type gives nullopt (a channel may carry other subscriptions). Throws
// FirmwareEventError for a record shorter than kDevxEventRecordLen; longer ones decode the same.
std::optional<PortChangeEvent> decode_devx_event(std::span<const uint8_t> record);

// "down", "active", "initialized", ...; "subtype <n>" for an unknown one.
std::string to_string(PortChangeSubtype s);

// ---- what the probe reads through (injected, so tests replay recorded replies) ----

// Runs raw firmware commands on one device (mlx5dv_devx_general_cmd in production).
class FirmwareCommandChannel {
 public:
  virtual ~FirmwareCommandChannel() = default;
  // Returns out_len reply bytes; throws Error when the command could not be delivered (a
  // firmware status is not a delivery failure: it is in the reply bytes).
  virtual std::vector<uint8_t> execute(std::span<const uint8_t> in, size_t out_len) = 0;
  virtual std::string device() const = 0;  // "mlx5_0"
};

// Asynchronous firmware events of one device (a DevX event channel in production). Used only
// alongside DevX polling: events add precision, the poll stays the reference.
class FirmwareEventChannel {
 public:
  virtual ~FirmwareEventChannel() = default;
  // Creates the channel and subscribes to event_type; throws Error when that fails (no DevX
  // uid, kernel without DevX events), and the probe then polls without events.
  virtual void subscribe(uint16_t event_type) = 0;
  // Waits up to timeout for one event record (cookie + EQE bytes, see decode_devx_event);
  // nullopt when none came. Throws Error when reading failed (events lost, device gone).
  virtual std::optional<std::vector<uint8_t>> read(std::chrono::milliseconds timeout) = 0;
  // The device port of the interface (1-based): events for other ports are ignored.
  virtual uint8_t port() const = 0;
};

struct PortState {
  uint8_t state = 0;       // enum ibv_port_state (4 = ACTIVE)
  uint8_t phys_state = 0;  // IB phys state (5 = LinkUp)
};

// ibv_query_port on one device port (any RDMA NIC).
class PortStateReader {
 public:
  virtual ~PortStateReader() = default;
  virtual PortState query() = 0;  // throws Error when the query fails
  virtual std::string device() const = 0;
};

// Which sources the probe may use. Both empty: find the RDMA device of the interface at start().
// With devx set, the probe falls back to port when the first DevX query fails. events is used
// only together with devx (and only when that query works).
struct FirmwareBackends {
  std::shared_ptr<FirmwareCommandChannel> devx;
  std::shared_ptr<PortStateReader> port;
  std::shared_ptr<FirmwareEventChannel> events;
};

struct FirmwareProbeConfig {
  std::string interface;                     // netdev ("eth1"): picks the RDMA device and port
  std::chrono::microseconds interval{1000};  // poll period (a firmware command is tens of us)
  VportStateQuery query;                     // DevX only
  std::string host;                          // Sample::host; empty -> gethostname()
};

constexpr const char* kFirmwareMethodDevx = "devx QUERY_VPORT_STATE";
constexpr const char* kFirmwareMethodDevxEvents = "devx QUERY_VPORT_STATE + PORT_CHANGE events";
constexpr const char* kFirmwareMethodIbv = "ibv_query_port (follows carrier on RoCE)";

class FirmwareProbe : public Probe {
 public:
  explicit FirmwareProbe(FirmwareProbeConfig config, FirmwareBackends backends = {});
  ~FirmwareProbe() override;

  std::string name() const override { return "firmware"; }
  // Picks the method and takes the first reading before returning. Available with method
  // kFirmwareMethodDevxEvents, kFirmwareMethodDevx or kFirmwareMethodIbv; when it fell back
  // from DevX, or DevX works but the PORT_CHANGE subscription failed, reason says why.
  ProbeStatus start(SampleSink sink) override;
  void stop() override;

  // Polls that failed (logged once per run of failures); read after stop().
  uint64_t failed_polls() const { return failed_polls_; }
  // Event reads that failed, and event records refused as malformed; read after stop().
  uint64_t failed_events() const { return failed_events_; }

 private:
  struct Reading {
    bool link = false;
    std::optional<uint8_t> admin;
    std::optional<uint8_t> phys_state;
  };
  Reading read();
  // Both under emit_mu_: the sink sees one thread at a time and link changes in order.
  void emit_changes(const Reading& r, bool first, std::vector<Sample>& out);
  void emit_event(const PortChangeEvent& e, int64_t t_ns, int64_t mono_ns);
  void run();
  void run_events();

  FirmwareProbeConfig config_;
  FirmwareBackends backends_;
  bool use_devx_ = false;
  std::string subject_;
  bool use_events_ = false;
  std::optional<Reading> last_;  // under emit_mu_ once the threads run
  // Counts events that set link: a poll whose query overlapped one is older than the event and
  // must not undo it (under emit_mu_).
  uint64_t event_generation_ = 0;
  std::vector<Sample> first_;
  SampleSink sink_;
  std::thread thread_;
  std::thread events_thread_;  // started by thread_ after the first samples, joined in stop()
  std::mutex emit_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
  uint64_t failed_polls_ = 0;
  std::atomic<uint64_t> failed_events_{0};
};

}  // namespace ocslab::probes
