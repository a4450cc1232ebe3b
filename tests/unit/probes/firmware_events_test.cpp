// The firmware probe's PORT_CHANGE events: DevX event records built byte by byte from the
// layout in firmware_probe.h (8-byte cookie, then the 64-byte EQE of include/linux/mlx5/device.h),
// and the probe fed scripted events next to scripted QUERY_VPORT_STATE replies. No ConnectX
// exists on this machine: every event here is replayed bytes, never one the firmware raised.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "ocslab/probes/firmware_probe.h"
#include "ocslab/testing/sample_collector.h"
#include "ocslab/testing/wait.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace firmware_events_test {

using namespace ocslab;
using namespace ocslab::probes;
using namespace std::chrono_literals;

namespace {

using Bytes = std::vector<uint8_t>;

// One record as mlx5dv_devx_get_event returns it: cookie (host order), then the EQE with type
// at byte 1, sub_type at byte 3 and the port in the upper nibble of EQE byte 40 (event data
// starts at 32, struct mlx5_eqe_port_state puts the port after 8 reserved bytes).
Bytes record(uint8_t type, uint8_t subtype, uint8_t port, uint64_t cookie = 0x1122334455667788ull) {
  Bytes r(kDevxEventRecordLen, 0);
  std::memcpy(r.data(), &cookie, sizeof(cookie));
  uint8_t* eqe = r.data() + 8;
  eqe[1] = type;
  eqe[3] = subtype;
  eqe[40] = static_cast<uint8_t>(port << 4);
  eqe[63] = 0x01;  // owner bit as the hardware leaves it: not part of the event
  return r;
}
Bytes port_down(uint8_t port = 1) { return record(0x09, 1, port); }
Bytes port_active(uint8_t port = 1) { return record(0x09, 4, port); }

Bytes reply(uint8_t state, uint8_t admin) {
  Bytes out(16, 0);
  out[15] = static_cast<uint8_t>((admin << 4) | state);
  return out;
}

// QUERY_VPORT_STATE replies the test sets while the probe runs. hold() parks the next query
// before it takes its reply (so the test can change the firmware state and raise an event with
// no poll in between); hook_next() runs inside the next query after it took its reply.
class SettableChannel : public FirmwareCommandChannel {
 public:
  explicit SettableChannel(Bytes r) : reply_(std::move(r)) {}
  std::vector<uint8_t> execute(std::span<const uint8_t>, size_t) override {
    std::function<void()> hook;
    Bytes r;
    {
      std::unique_lock lk(mu_);
      ++calls_;
      if (held_) {
        ++parked_;
        cv_.notify_all();
        cv_.wait(lk, [this] { return !held_; });
      }
      r = reply_;
      hook = std::exchange(hook_, nullptr);
    }
    if (hook) hook();
    return r;
  }
  void hold() {
    std::lock_guard lk(mu_);
    held_ = true;
    parked_ = 0;
  }
  bool wait_parked() {
    std::unique_lock lk(mu_);
    // load-safe: an event wait (a reader parked); 2 s is its hang guard.
    return cv_.wait_for(lk, 2s, [this] { return parked_ > 0; });
  }
  void release() {
    std::lock_guard lk(mu_);
    held_ = false;
    cv_.notify_all();
  }
  std::string device() const override { return "mlx5_0"; }
  void set(Bytes r) {
    std::lock_guard lk(mu_);
    reply_ = std::move(r);
  }
  // Runs once, inside the next query, after that query has taken its reply.
  void hook_next(std::function<void()> f) {
    std::lock_guard lk(mu_);
    hook_ = std::move(f);
  }
  size_t calls() {
    std::lock_guard lk(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Bytes reply_;
  std::function<void()> hook_;
  size_t calls_ = 0;
  bool held_ = false;
  size_t parked_ = 0;
};

// Replays event records the test pushes, as a subscribed DevX event channel would hand them out.
class ScriptedEvents : public FirmwareEventChannel {
 public:
  explicit ScriptedEvents(std::string subscribe_error = "", uint8_t port = 1)
      : subscribe_error_(std::move(subscribe_error)), port_(port) {}
  void subscribe(uint16_t event_type) override {
    std::lock_guard lk(mu_);
    subscribed_.push_back(event_type);
    if (!subscribe_error_.empty()) throw SystemError(subscribe_error_, EPERM);
  }
  std::optional<std::vector<uint8_t>> read(std::chrono::milliseconds timeout) override {
    std::unique_lock lk(mu_);
    ++reads_;
    if (fail_reads_ || fail_once_) {
      fail_once_ = false;
      throw Error("mlx5dv_devx_get_event on mlx5_0: Value too large (EOVERFLOW)");
    }
    // load-safe: the replayed channel's blocking read: an event wait whose timeout is the probe's own.
    if (!cv_.wait_for(lk, timeout, [this] { return !queue_.empty(); })) return std::nullopt;
    Bytes r = queue_.front();
    queue_.pop_front();
    return r;
  }
  uint8_t port() const override { return port_; }

  void push(Bytes r) {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(r));
    cv_.notify_all();
  }
  void fail_reads() {
    std::lock_guard lk(mu_);
    fail_reads_ = true;
  }
  void fail_next_read() {
    std::lock_guard lk(mu_);
    fail_once_ = true;
  }
  std::vector<uint16_t> subscribed() {
    std::lock_guard lk(mu_);
    return subscribed_;
  }
  size_t reads() {
    std::lock_guard lk(mu_);
    return reads_;
  }
  bool drained() {
    std::lock_guard lk(mu_);
    return queue_.empty();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Bytes> queue_;
  std::string subscribe_error_;
  uint8_t port_;
  std::vector<uint16_t> subscribed_;
  bool fail_reads_ = false;
  bool fail_once_ = false;
  size_t reads_ = 0;
};

using Collector = ocslab::testing::SampleCollector;

FirmwareProbeConfig config(std::chrono::microseconds interval = 1000us) {
  FirmwareProbeConfig c;
  c.interface = "eth1";
  c.interval = interval;
  c.host = "h1";
  return c;
}

template <typename Pred>
bool eventually(Pred pred) {
  return ocslab::testing::poll_until(pred, 2000ms);
}

// "link=1", "port_change=4", ... in emission order, admin left out.
std::vector<std::string> link_story(const Collector& c) {
  std::vector<std::string> out;
  for (const auto& s : c.samples()) {
    if (s.signal == "link" || s.signal == "port_change") {
      out.push_back(s.signal + "=" + std::to_string(static_cast<int>(s.value)));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("DevX event record: PORT_CHANGE port active", "[firmware][events]") {
  auto e = decode_devx_event(port_active(1));
  REQUIRE(e);
  CHECK(e->subtype == 4);
  CHECK(e->port == 1);
  CHECK(e->cookie == 0x1122334455667788ull);
  REQUIRE(e->link());
  CHECK(*e->link());
}

TEST_CASE("DevX event record: PORT_CHANGE port down on port 2", "[firmware][events]") {
  auto e = decode_devx_event(port_down(2));
  REQUIRE(e);
  CHECK(e->subtype == static_cast<uint8_t>(PortChangeSubtype::kDown));
  CHECK(e->port == 2);
  REQUIRE(e->link());
  CHECK_FALSE(*e->link());
  // The low nibble of the port byte is reserved: it does not change the port.
  Bytes r = port_down(2);
  r[8 + 40] |= 0x0f;
  CHECK(decode_devx_event(r)->port == 2);
}

TEST_CASE("DevX event record: PORT_CHANGE subtypes that are not link changes", "[firmware][events]") {
  for (uint8_t sub : {5, 6, 7, 8, 9, 0x42}) {
    auto e = decode_devx_event(record(0x09, sub, 1));
    REQUIRE(e);
    CHECK(e->subtype == sub);
    CHECK_FALSE(e->link());
  }
  CHECK(to_string(PortChangeSubtype::kActive) == "active");
  CHECK(to_string(PortChangeSubtype::kDown) == "down");
  CHECK(to_string(static_cast<PortChangeSubtype>(0x42)) == "subtype 66");
}

TEST_CASE("DevX event record: other event types are ignored", "[firmware][events]") {
  // 0x0d NIC_VPORT_CHANGE, 0x16 PORT_MODULE_EVENT, 0x08 INTERNAL_ERROR, 0x00 COMP: even with
  // an ACTIVE-looking sub_type and a port, only type 0x09 is a PORT_CHANGE.
  for (uint8_t type : {0x00, 0x08, 0x0d, 0x16, 0x89}) CHECK_FALSE(decode_devx_event(record(type, 4, 1)));
  // The type is EQE byte 1, not byte 0 of the record (the cookie) nor EQE byte 0.
  Bytes r = record(0x0d, 4, 1, 0x09);
  r[8] = 0x09;
  CHECK_FALSE(decode_devx_event(r));
}

TEST_CASE("DevX event record: truncated records are refused, longer ones decode", "[firmware][events]") {
  Bytes full = port_active();
  for (size_t n : {0, 1, 8, 11, 48, 71}) {
    Bytes cut(full.begin(), full.begin() + static_cast<long>(n));
    CHECK_THROWS_AS(decode_devx_event(cut), FirmwareEventError);
  }
  CHECK_THROWS_WITH(decode_devx_event(Bytes(71, 0)), Catch::Contains("71 bytes") && Catch::Contains("72"));
  CHECK_THROWS_AS(decode_devx_event(Bytes(8, 0)), Error);  // one ocslab::Error family
  Bytes longer = full;
  longer.resize(144, 0xee);
  auto e = decode_devx_event(longer);
  REQUIRE(e);
  CHECK(e->subtype == 4);
}

TEST_CASE("firmware probe emits PORT_CHANGE events as they are read, polls stay the reference", "[firmware][events]") {
  auto channel = std::make_shared<SettableChannel>(reply(1, 1));
  auto events = std::make_shared<ScriptedEvents>();
  FirmwareProbe probe(config(), {channel, nullptr, events});
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  REQUIRE(st.available);
  CHECK(st.method == "devx QUERY_VPORT_STATE + PORT_CHANGE events");
  CHECK(st.reason.empty());
  CHECK(events->subscribed() == std::vector<uint16_t>{0x09});
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link"; }));

  // 1. The link goes down and the firmware raises DOWN while the next poll is parked: link 0
  //    comes from the event, with its marker, at the time the event was read.
  channel->hold();
  REQUIRE(channel->wait_parked());
  channel->set(reply(0, 1));
  events->push(port_down());
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link" && s.value == 0; }));
  // 2. The polls then agree: no second link 0.
  channel->release();
  size_t calls = channel->calls();
  REQUIRE(eventually([&] { return channel->calls() >= calls + 5; }));
  // 3. The link comes up without an event (one lost, or the vport came up on its own): the
  //    poll, the reference, reports it, and no port_change stands next to it.
  channel->set(reply(1, 1));
  REQUIRE(eventually([&] { return c.signal("link").size() == 3; }));
  // 4. A late ACTIVE event for a link already up: the marker only.
  events->push(port_active());
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "port_change" && s.value == 4; }));
  // 5. A PKEY change on the port: a marker, no link change.
  events->push(record(0x09, 7, 1));
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "port_change" && s.value == 7; }));
  probe.stop();

  CHECK(link_story(c) ==
        std::vector<std::string>{"link=1", "port_change=1", "link=0", "link=1", "port_change=4", "port_change=7"});
  auto all = c.samples();
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].mono_ns <= all[i].mono_ns);
  // The event's link sample carries the event's own time.
  auto pc = c.signal("port_change");
  auto link = c.signal("link");
  CHECK(pc[0].mono_ns == link[1].mono_ns);
  CHECK(pc[0].t_ns == link[1].t_ns);
  // The poll's link sample has no marker at its time.
  for (const auto& p : pc) CHECK(p.mono_ns != link[2].mono_ns);
  for (const auto& s : pc) {
    CHECK(s.source == "firmware");
    CHECK(s.subject == "mlx5_0/eth1");
    CHECK(s.unit == "mlx5_port_change");
    CHECK(s.host == "h1");
  }
  CHECK(c.signal("admin").size() == 1);
  CHECK(probe.failed_events() == 0);
}

TEST_CASE("firmware probe ignores other ports, other event types and refuses short records", "[firmware][events]") {
  auto channel = std::make_shared<SettableChannel>(reply(1, 1));
  auto events = std::make_shared<ScriptedEvents>("", 2);  // the interface is on port 2
  // Polls far apart: only the start query runs, so every link change here is an event's.
  FirmwareProbe probe(config(10s), {channel, nullptr, events});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  events->push(port_down(1));        // the other port of a dual-port device
  events->push(record(0x0d, 1, 2));  // NIC_VPORT_CHANGE, not a port event
  events->push(Bytes(40, 0));        // cut short
  events->push(port_down(2));        // this one counts
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "port_change"; }));
  REQUIRE(eventually([&] { return events->drained(); }));
  probe.stop();
  CHECK(link_story(c) == std::vector<std::string>{"link=1", "port_change=1", "link=0"});
  CHECK(probe.failed_events() == 1);
}

TEST_CASE("a poll in flight while an event is read does not undo the event", "[firmware][events]") {
  auto channel = std::make_shared<SettableChannel>(reply(1, 1));
  auto events = std::make_shared<ScriptedEvents>();
  FirmwareProbe probe(config(), {channel, nullptr, events});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link"; }));
  // The next query has already taken its answer ("up") when the DOWN event is read and
  // emitted; its answer is older than the event and must not bounce the link back up.
  channel->hook_next([&] {
    channel->set(reply(0, 1));  // the firmware's state from now on; this query answered before
    events->push(port_down());
    c.wait_for_sample([](const Sample& s) { return s.signal == "link" && s.value == 0; });
  });
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link" && s.value == 0; }));
  size_t calls = channel->calls();
  REQUIRE(eventually([&] { return channel->calls() >= calls + 5; }));
  probe.stop();
  CHECK(link_story(c) == std::vector<std::string>{"link=1", "port_change=1", "link=0"});
}

TEST_CASE("firmware probe polls on when the PORT_CHANGE subscription fails", "[firmware][events]") {
  auto channel = std::make_shared<SettableChannel>(reply(1, 1));
  auto events = std::make_shared<ScriptedEvents>("mlx5dv_devx_subscribe_devx_event 0x09 on mlx5_0");
  FirmwareProbe probe(config(), {channel, nullptr, events});
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  REQUIRE(st.available);
  CHECK(st.method == "devx QUERY_VPORT_STATE");
  CHECK_THAT(st.reason, Catch::Contains("PORT_CHANGE events not available"));
  CHECK_THAT(st.reason, Catch::Contains("mlx5dv_devx_subscribe_devx_event 0x09"));
  CHECK_THAT(st.reason, Catch::Contains("polling only"));
  channel->set(reply(0, 1));
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link" && s.value == 0; }));
  events->push(port_active());  // never read: the channel is not subscribed
  // load-safe: time for a read that must not happen; a slow machine can only hide a fault, not fail the case.
  std::this_thread::sleep_for(50ms);  // kept: time for a read that must not happen
  probe.stop();
  CHECK(events->reads() == 0);
  CHECK(link_story(c) == std::vector<std::string>{"link=1", "link=0"});
}

TEST_CASE("firmware probe keeps polling when event reads fail, and stops promptly", "[firmware][events]") {
  auto channel = std::make_shared<SettableChannel>(reply(1, 1));
  auto events = std::make_shared<ScriptedEvents>();
  events->fail_reads();
  FirmwareProbe probe(config(), {channel, nullptr, events});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  channel->set(reply(0, 1));
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link" && s.value == 0; }));
  REQUIRE(eventually([&] { return probe.failed_events() >= 2; }));
  auto t0 = std::chrono::steady_clock::now();
  probe.stop();
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  // A failing channel backs off instead of spinning: about one read per 50 ms here.
  CHECK(events->reads() < 100);
  CHECK(c.signal("port_change").empty());
}

TEST_CASE("after one failed event read (events dropped) the next events are read at once", "[firmware][events]") {
  auto channel = std::make_shared<SettableChannel>(reply(0, 1));
  auto events = std::make_shared<ScriptedEvents>();
  // Queued before the start: the first read fails (EOVERFLOW), the event behind it is read next.
  events->fail_next_read();
  events->push(port_active());
  FirmwareProbe probe(config(10s), {channel, nullptr, events});
  Collector c;
  REQUIRE(probe.start(c.sink()).available);
  REQUIRE(c.wait_for_sample([](const Sample& s) { return s.signal == "link" && s.value == 1; }));
  probe.stop();
  CHECK(probe.failed_events() == 1);
  CHECK(link_story(c) == std::vector<std::string>{"link=0", "port_change=4", "link=1"});
}

TEST_CASE("events are not used when DevX falls back to ibv_query_port", "[firmware][events]") {
  Bytes refused(16, 0);
  refused[0] = 0x03;  // BAD_PARAM
  auto channel = std::make_shared<SettableChannel>(refused);
  struct UpPort : PortStateReader {
    PortState query() override { return {4, 5}; }
    std::string device() const override { return "mlx5_0"; }
  };
  auto events = std::make_shared<ScriptedEvents>();
  FirmwareProbe probe(config(), {channel, std::make_shared<UpPort>(), events});
  Collector c;
  ProbeStatus st = probe.start(c.sink());
  REQUIRE(st.available);
  CHECK(st.method == "ibv_query_port (follows carrier on RoCE)");
  probe.stop();
  CHECK(events->subscribed().empty());
}

}  // namespace firmware_events_test
