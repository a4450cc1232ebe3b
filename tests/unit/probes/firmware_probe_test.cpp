// The firmware link-state probe: QUERY_VPORT_STATE bytes as docs/protocols.md lays them
// out, replayed firmware replies (no mlx5 firmware exists on this machine, so a replaying
// command channel stands in for mlx5dv_devx_general_cmd), and the real device discovery
// against an interface without an RDMA device.
#include "ocslab/probes/firmware_probe.h"
#include "ocslab/testing/sample_collector.h"
#include "ocslab/testing/wait.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "ocslab/common/clock.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace firmware_probe_test {

using namespace ocslab;
using namespace ocslab::probes;
using namespace std::chrono_literals;

namespace {

using Bytes = std::vector<uint8_t>;

// A QUERY_VPORT_STATE reply as the firmware lays it out.
Bytes reply(uint8_t state, uint8_t admin, uint8_t status = 0, uint32_t syndrome = 0) {
  Bytes out(16, 0);
  out[0] = status;
  out[4] = static_cast<uint8_t>(syndrome >> 24);
  out[5] = static_cast<uint8_t>(syndrome >> 16);
  out[6] = static_cast<uint8_t>(syndrome >> 8);
  out[7] = static_cast<uint8_t>(syndrome);
  out[15] = static_cast<uint8_t>((admin << 4) | state);
  return out;
}

// Replays a script of replies, repeating the last one; records every command it was given.
class ReplayChannel : public FirmwareCommandChannel {
 public:
  explicit ReplayChannel(std::deque<Bytes> script) : script_(std::move(script)) {}
  std::vector<uint8_t> execute(std::span<const uint8_t> in, size_t out_len) override {
    std::lock_guard lk(mu_);
    commands_.emplace_back(in.begin(), in.end());
    out_lens_.push_back(out_len);
    Bytes r = script_.front();
    if (script_.size() > 1) script_.pop_front();
    return r;
  }
  std::string device() const override { return "mlx5_0"; }
  size_t calls() {
    std::lock_guard lk(mu_);
    return commands_.size();
  }
  std::vector<Bytes> commands() {
    std::lock_guard lk(mu_);
    return commands_;
  }
  std::vector<size_t> out_lens() {
    std::lock_guard lk(mu_);
    return out_lens_;
  }

 private:
  std::mutex mu_;
  std::deque<Bytes> script_;
  std::vector<Bytes> commands_;
  std::vector<size_t> out_lens_;
};

class ReplayPort : public PortStateReader {
 public:
  explicit ReplayPort(std::deque<PortState> script) : script_(std::move(script)) {}
  PortState query() override {
    std::lock_guard lk(mu_);
    ++calls_;
    PortState p = script_.front();
    if (script_.size() > 1) script_.pop_front();
    return p;
  }
  std::string device() const override { return "rxe_eth1"; }
  size_t calls() {
    std::lock_guard lk(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::deque<PortState> script_;
  size_t calls_ = 0;
};

using Collector = ocslab::testing::SampleCollector;

// Waits (2 s at most) until pred() holds.
template <typename Pred>
bool eventually(Pred pred) {
  return ocslab::testing::poll_until(pred, 2000ms);
}

FirmwareProbeConfig config(std::chrono::microseconds interval = 1000us) {
  FirmwareProbeConfig c;
  c.interface = "eth1";
  c.interval = interval;
  c.host = "h1";
  return c;
}

}  // namespace

TEST_CASE("QUERY_VPORT_STATE input for the own vNIC", "[firmware]") {
  auto in = encode_query_vport_state({});
  Bytes expected = {0x07, 0x50, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0, 0x00, 0x00, 0, 0, 0, 0};
  CHECK(Bytes(in.begin(), in.end()) == expected);
}

TEST_CASE("QUERY_VPORT_STATE input for the uplink", "[firmware]") {
  auto in = encode_query_vport_state({VportOpMod::kUplink, false, 0});
  Bytes expected = {0x07, 0x50, 0, 0, 0, 0, 0x00, 0x02, 0x00, 0, 0x00, 0x00, 0, 0, 0, 0};
  CHECK(Bytes(in.begin(), in.end()) == expected);
}

TEST_CASE("QUERY_VPORT_STATE input for another vport", "[firmware]") {
  // vport 0x0102 distinguishes the byte order of vport_number; the eswitch op_mod its field.
  auto in = encode_query_vport_state({VportOpMod::kEswitchVport, true, 0x0102});
  Bytes expected = {0x07, 0x50, 0, 0, 0, 0, 0x00, 0x01, 0x80, 0, 0x01, 0x02, 0, 0, 0, 0};
  CHECK(Bytes(in.begin(), in.end()) == expected);
  auto vf = encode_query_vport_state({VportOpMod::kVnic, true, 3});
  Bytes expected_vf = {0x07, 0x50, 0, 0, 0, 0, 0x00, 0x00, 0x80, 0, 0x00, 0x03, 0, 0, 0, 0};
  CHECK(Bytes(vf.begin(), vf.end()) == expected_vf);
}

TEST_CASE("QUERY_VPORT_STATE reply: state and admin state", "[firmware]") {
  VportState up = decode_query_vport_state(reply(1, 1));
  CHECK(up.up());
  CHECK(up.state == 1);
  CHECK(up.admin_state == 1);

  VportState down = decode_query_vport_state(reply(0, 1));
  CHECK_FALSE(down.up());
  CHECK(down.admin_state == 1);

  // Admin down by the administrator; admin "follow" (2) tracks the uplink.
  VportState admin_down = decode_query_vport_state(reply(0, 0));
  CHECK(admin_down.admin_state == 0);
  VportState follow = decode_query_vport_state(reply(1, 2));
  CHECK(follow.up());
  CHECK(follow.admin_state == 2);

  // Reserved bytes and the syndrome field of a successful reply do not matter.
  Bytes noisy = reply(1, 2);
  noisy[8] = 0xff;
  noisy[14] = 0xff;
  CHECK(decode_query_vport_state(noisy).up());
  // A longer output buffer (the caller's) decodes the same.
  Bytes longer = reply(1, 1);
  longer.resize(64, 0xee);
  CHECK(decode_query_vport_state(longer).up());
}

TEST_CASE("QUERY_VPORT_STATE reply with a firmware error names status and syndrome", "[firmware]") {
  // status 0x03 BAD_PARAM, as the firmware answers an uplink query from a non-manager function.
  Bytes r = reply(1, 1, 0x03, 0x1234abcd);
  try {
    decode_query_vport_state(r);
    FAIL("no error for a non-zero status");
  } catch (const FirmwareCommandError& e) {
    CHECK(e.status() == 0x03);
    CHECK(e.syndrome() == 0x1234abcd);
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("0x750"));
    CHECK_THAT(what, Catch::Contains("status 0x03"));
    CHECK_THAT(what, Catch::Contains("syndrome 0x1234abcd"));
  }
  // Derives from ocslab::Error as every failure does.
  CHECK_THROWS_AS(decode_query_vport_state(reply(0, 0, 0x01, 0)), Error);
}

TEST_CASE("QUERY_VPORT_STATE reply shorter than 16 bytes is refused", "[firmware]") {
  Bytes full = reply(1, 1);
  for (size_t n : {0, 1, 8, 15}) {
    Bytes cut(full.begin(), full.begin() + static_cast<long>(n));
    CHECK_THROWS_AS(decode_query_vport_state(cut), FirmwareReplyError);
  }
  // Even when its status byte says error: a short buffer is not a reply.
  CHECK_THROWS_AS(decode_query_vport_state(Bytes{0x03, 0, 0, 0}), FirmwareReplyError);
  CHECK_THROWS_WITH(decode_query_vport_state(Bytes(15, 0)), Catch::Contains("15 bytes"));
}

TEST_CASE("vport op_mod names", "[firmware]") {
  CHECK(parse_vport_op_mod("vnic") == VportOpMod::kVnic);
  CHECK(parse_vport_op_mod("uplink") == VportOpMod::kUplink);
  CHECK(parse_vport_op_mod("eswitch") == VportOpMod::kEswitchVport);
  CHECK(to_string(VportOpMod::kUplink) == "uplink");
  CHECK_THROWS_WITH(parse_vport_op_mod("wan"), Catch::Contains("'wan'"));
}

TEST_CASE("firmware probe over DevX emits link only on change", "[firmware]") {
  // up x3, down x5, up again: three link samples (start, fall, rise), admin once.
  std::deque<Bytes> script;
  for (int i = 0; i < 3; ++i) script.push_back(reply(1, 1));
  for (int i = 0; i < 5; ++i) script.push_back(reply(0, 1));
  script.push_back(reply(1, 1));
  auto channel = std::make_shared<ReplayChannel>(script);
  auto cfg = config();
  cfg.query = {VportOpMod::kUplink, false, 0};
  FirmwareProbe probe(cfg, {channel, nullptr, nullptr});
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  REQUIRE(st.available);
  CHECK(st.method == "devx QUERY_VPORT_STATE");
  CHECK(st.reason.empty());
  REQUIRE(eventually([&] { return channel->calls() >= 15; }));
  probe.stop();

  auto link = c.signal("link");
  REQUIRE(link.size() == 3);
  CHECK(link[0].value == 1);
  CHECK(link[1].value == 0);
  CHECK(link[2].value == 1);
  CHECK(link[0].mono_ns < link[1].mono_ns);
  CHECK(link[1].mono_ns < link[2].mono_ns);
  CHECK(link[0].t_ns < link[2].t_ns);
  for (const auto& s : link) {
    CHECK(s.source == "firmware");
    CHECK(s.subject == "mlx5_0/eth1");
    CHECK(s.unit == "bool");
    CHECK(s.host == "h1");
  }
  auto admin = c.signal("admin");
  REQUIRE(admin.size() == 1);
  CHECK(admin[0].value == 1);
  CHECK(c.signal("phys_state").empty());
  // Every command sent was the uplink query, with a 16-byte reply buffer.
  for (const auto& cmd : channel->commands()) CHECK(cmd == Bytes{0x07, 0x50, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0});
  for (size_t len : channel->out_lens()) CHECK(len == 16);
}

TEST_CASE("firmware probe reports an admin state change", "[firmware]") {
  auto channel = std::make_shared<ReplayChannel>(std::deque<Bytes>{reply(1, 1), reply(0, 0)});
  FirmwareProbe probe(config(), {channel, nullptr, nullptr});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  REQUIRE(eventually([&] { return c.signal("admin").size() >= 2; }));
  probe.stop();
  auto admin = c.signal("admin");
  REQUIRE(admin.size() == 2);
  CHECK(admin[0].value == 1);
  CHECK(admin[1].value == 0);
  CHECK(admin[1].unit == "vport_admin");
  CHECK(c.signal("link").size() == 2);
}

TEST_CASE("firmware probe falls back to ibv_query_port when the firmware refuses DevX", "[firmware]") {
  auto channel = std::make_shared<ReplayChannel>(std::deque<Bytes>{reply(0, 0, 0x03, 0x00beef00)});
  // ACTIVE + LinkUp, then DOWN + Polling (the link is retraining), then up again.
  auto port = std::make_shared<ReplayPort>(std::deque<PortState>{{4, 5}, {4, 5}, {1, 2}, {1, 2}, {4, 5}});
  FirmwareProbe probe(config(), {channel, port, nullptr});
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  REQUIRE(st.available);
  CHECK(st.method == "ibv_query_port (follows carrier on RoCE)");
  CHECK_THAT(st.reason, Catch::Contains("status 0x03"));
  CHECK_THAT(st.reason, Catch::Contains("syndrome 0x00beef00"));
  REQUIRE(eventually([&] { return port->calls() >= 8; }));
  probe.stop();
  CHECK(channel->calls() == 1);  // DevX is not retried after the refusal
  auto link = c.signal("link");
  REQUIRE(link.size() == 3);
  CHECK(link[0].value == 1);
  CHECK(link[1].value == 0);
  CHECK(link[2].value == 1);
  CHECK(link[0].subject == "rxe_eth1/eth1");
  auto phys = c.signal("phys_state");
  REQUIRE(phys.size() == 3);
  CHECK(phys[1].value == 2);
  CHECK(c.signal("admin").empty());
}

TEST_CASE("firmware probe keeps polling after failed polls", "[firmware]") {
  // A short reply mid-run (device reset) is logged and counted, not a false link change.
  auto channel = std::make_shared<ReplayChannel>(std::deque<Bytes>{reply(1, 1), Bytes(4, 0), Bytes(4, 0), reply(1, 1)});
  FirmwareProbe probe(config(), {channel, nullptr, nullptr});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  REQUIRE(eventually([&] { return channel->calls() >= 6; }));
  probe.stop();
  CHECK(probe.failed_polls() == 2);
  CHECK(c.signal("link").size() == 1);
}

TEST_CASE("firmware probe polls on a steady schedule and stops promptly", "[firmware]") {
  auto channel = std::make_shared<ReplayChannel>(std::deque<Bytes>{reply(1, 1)});
  FirmwareProbe probe(config(20ms), {channel, nullptr, nullptr});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  // load-bound: the window over which the poll rate is counted (6 to 13 polls of 20 ms in 210 ms): a starved probe
  // thread polls fewer.
  std::this_thread::sleep_for(210ms);  // kept: the window over which the poll rate is counted
  auto t0 = std::chrono::steady_clock::now();
  probe.stop();
  auto stop_took = std::chrono::steady_clock::now() - t0;
  // A 20 ms period in 210 ms: the start query plus about 10 polls. Loose bounds: this machine
  // is shared, the check is against a drifting or a bursting schedule, not for precision.
  CHECK(channel->calls() >= 6);
  CHECK(channel->calls() <= 13);
  // stop() wakes the wait instead of sleeping out the period.
  FirmwareProbe slow(config(10s), {channel, nullptr, nullptr});
  REQUIRE(slow.start(c.sink()).available);
  auto t1 = std::chrono::steady_clock::now();
  slow.stop();
  CHECK(std::chrono::steady_clock::now() - t1 < 1s);
  CHECK(stop_took < 1s);
  slow.stop();  // idempotent
}

TEST_CASE("firmware probe refuses a second start and a non-positive interval", "[firmware]") {
  auto channel = std::make_shared<ReplayChannel>(std::deque<Bytes>{reply(1, 1)});
  FirmwareProbe probe(config(), {channel, nullptr, nullptr});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  CHECK_THROWS_AS(probe.start(c.sink()), Error);
  probe.stop();
  CHECK_THROWS_AS(FirmwareProbe(config(0us)), Error);
}

TEST_CASE("firmware probe is unavailable on an interface without an RDMA device", "[firmware]") {
  // The real discovery: loopback never has an RDMA device (Soft-RoCE refuses it).
  FirmwareProbeConfig cfg = config();
  cfg.interface = "lo";
  FirmwareProbe probe(cfg);
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  CHECK_FALSE(st.available);
  CHECK_THAT(st.reason, Catch::Contains("lo"));
  INFO(st.reason);
  probe.stop();
  CHECK(c.samples().empty());

  cfg.interface = "no-such-if0";
  FirmwareProbe missing(cfg);
  ProbeStatus st2 = missing.start(c.sink());
  CHECK_FALSE(st2.available);
  CHECK_THAT(st2.reason, Catch::Contains("no-such-if0"));
}

}  // namespace firmware_probe_test
