// The firmware link-state probe: polls the NIC firmware's own view of one interface's link
// (mlx5 DevX QUERY_VPORT_STATE on ConnectX; ibv_query_port on any other RDMA NIC), so a
// timeline shows when the firmware, not only the kernel, considers the link up after a switch
// reconfiguration (with auto-negotiation that is seconds after the light returns).
//
// Samples (source "firmware", subject "<device>/<interface>"), once at start and then only on
// change; t_ns / mono_ns are taken right after the query that saw the new value returns:
//   link        1 up / 0 down, unit "bool"
//   admin       DevX only: the vport's admin_state (PRM: 0 down, 1 up, 2 follow), unit "vport_admin"
//   phys_state  ibv_query_port only: IB physical port state (5 LinkUp, 2 Polling, 3 Disabled),
//               unit "ib_phys_state"
#pragma once

#include <array>
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

// ---- mlx5 firmware command QUERY_VPORT_STATE (PROTOCOLS.md section 7) ----

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
// With devx set, the probe falls back to port when the first DevX query fails.
struct FirmwareBackends {
  std::shared_ptr<FirmwareCommandChannel> devx;
  std::shared_ptr<PortStateReader> port;
};

struct FirmwareProbeConfig {
  std::string interface;                     // netdev ("eth1"): picks the RDMA device and port
  std::chrono::microseconds interval{1000};  // poll period (a firmware command is tens of us)
  VportStateQuery query;                     // DevX only
  std::string host;                          // Sample::host; empty -> gethostname()
};

constexpr const char* kFirmwareMethodDevx = "devx QUERY_VPORT_STATE";
constexpr const char* kFirmwareMethodIbv = "ibv_query_port (follows carrier on RoCE)";

class FirmwareProbe : public Probe {
 public:
  explicit FirmwareProbe(FirmwareProbeConfig config, FirmwareBackends backends = {});
  ~FirmwareProbe() override;

  std::string name() const override { return "firmware"; }
  // Picks the method and takes the first reading before returning. Available with method
  // kFirmwareMethodDevx or kFirmwareMethodIbv; when it fell back from DevX, reason says why.
  ProbeStatus start(SampleSink sink) override;
  void stop() override;

  // Polls that failed (logged once per run of failures); read after stop().
  uint64_t failed_polls() const { return failed_polls_; }

 private:
  struct Reading {
    bool link = false;
    std::optional<uint8_t> admin;
    std::optional<uint8_t> phys_state;
  };
  Reading read();
  void emit_changes(const Reading& r, bool first, std::vector<Sample>& out);
  void run();

  FirmwareProbeConfig config_;
  FirmwareBackends backends_;
  bool use_devx_ = false;
  std::string subject_;
  std::optional<Reading> last_;
  std::vector<Sample> first_;
  SampleSink sink_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
  uint64_t failed_polls_ = 0;
};

}  // namespace ocslab::probes
