#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>

#include "ocslab/common/clock.h"
#include "ocslab/emulator/switch_model.h"
#include "ocslab/testing/io_run.h"

// This file's helpers in a namespace of its own: the unity build compiles it together with
// the other tests of its binary.
namespace switch_model_test {

using namespace ocslab;
using namespace ocslab::emu;

namespace {

struct Rig {
  boost::asio::io_context io;
  GroundTruth truth{"ocs"};
  SwitchModel model;
  std::vector<std::pair<Port, std::optional<Port>>> paths;
  std::vector<std::pair<Port, bool>> lights;

  explicit Rig(SwitchParams p) : model(io, std::move(p), truth) {
    model.on_path([this](Port in, std::optional<Port> out) { paths.emplace_back(in, out); });
    model.on_light([this](Port out, bool lit, double) { lights.emplace_back(out, lit); });
  }
  void run_through(std::chrono::milliseconds d) { ocslab::testing::run_through(io, d); }
  int count(const std::string& signal) {
    int n = 0;
    for (const auto& s : truth.samples()) n += s.signal == signal;
    return n;
  }
};

SwitchParams small(double switching_ms) {
  SwitchParams p;
  p.ingress_ports = 4;
  p.egress_ports = 4;
  p.switching = Distribution::fixed(switching_ms);
  return p;
}

}  // namespace

TEST_CASE("a circuit lights its egress only after the switching time", "[emulator]") {
  Rig r(small(40));
  bool done = false;
  int64_t t0 = monotonic_ns(), t_done = 0;
  REQUIRE_FALSE(r.model.connect({{1, 5}}, [&] {
    done = true;
    t_done = monotonic_ns();
  }));
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 5}});
  CHECK_FALSE(r.model.lit(5));
  CHECK(r.model.power_dbm(5) == -60.0);
  r.run_through(std::chrono::milliseconds(200));
  REQUIRE(done);
  double waited_ms = static_cast<double>(t_done - t0) / 1e6;
  CHECK(waited_ms >= 40.0);
  CHECK(waited_ms < 150.0);
  CHECK(r.model.lit(5));
  CHECK(r.model.power_dbm(5) == Approx(-1.5));  // 0 dBm source minus 1.5 dB insertion loss
  CHECK(r.paths == std::vector<std::pair<Port, std::optional<Port>>>{{1, 5}});
  CHECK(r.lights == std::vector<std::pair<Port, bool>>{{5, true}});
  CHECK(r.count("switch_start") == 1);
  CHECK(r.count("switch_end") == 1);
}

TEST_CASE("moving a circuit darkens the old egress at once and lights the new one later", "[emulator]") {
  Rig r(small(20));
  REQUIRE_FALSE(r.model.connect({{1, 5}, {2, 6}}, [] {}));
  r.run_through(std::chrono::milliseconds(100));
  r.lights.clear();
  r.paths.clear();
  REQUIRE_FALSE(r.model.disconnect({1, 2}));
  CHECK_FALSE(r.model.lit(5));
  CHECK_FALSE(r.model.lit(6));
  REQUIRE_FALSE(r.model.connect({{1, 6}, {2, 5}}, [] {}));
  CHECK(r.lights == std::vector<std::pair<Port, bool>>{{5, false}, {6, false}});
  r.run_through(std::chrono::milliseconds(100));
  CHECK(r.model.lit(5));
  CHECK(r.model.lit(6));
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 6}, {2, 5}});
}

TEST_CASE("a patched port is refused unless replacing is configured", "[emulator]") {
  Rig r(small(0));
  REQUIRE_FALSE(r.model.connect({{1, 5}}, [] {}));
  auto err = r.model.connect({{1, 6}}, [] {});
  REQUIRE(err);
  CHECK(err->kind == ModelError::Kind::kPortInUse);
  CHECK(err->text == "Port already connected: 1");
  err = r.model.connect({{2, 5}}, [] {});
  REQUIRE(err);
  CHECK(err->text == "Port already connected: 5");
  err = r.model.connect({{1, 9}}, [] {});
  REQUIRE(err);
  CHECK(err->kind == ModelError::Kind::kInvalidPort);
  CHECK(err->text == "Invalid OXC port: 9");
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 5}});  // nothing changed by refusals

  auto p = small(0);
  p.replace_patched = true;
  Rig rr(p);
  REQUIRE_FALSE(rr.model.connect({{1, 5}, {2, 6}}, [] {}));
  REQUIRE_FALSE(rr.model.connect({{1, 6}}, [] {}));
  CHECK(rr.model.circuits() == std::vector<Circuit>{{1, 6}});
}

TEST_CASE("a superseded move still completes its command", "[emulator]") {
  Rig r(small(30));
  int done = 0;
  REQUIRE_FALSE(r.model.connect({{1, 5}}, [&] { ++done; }));
  REQUIRE_FALSE(r.model.disconnect({1}));
  r.run_through(std::chrono::milliseconds(100));
  CHECK(done == 1);
  CHECK(r.model.circuits().empty());
  CHECK(r.lights.empty());  // never lit
}

TEST_CASE("shutters and blocking fabrics darken circuits", "[emulator]") {
  Rig r(small(0));
  REQUIRE_FALSE(r.model.connect({{1, 5}}, [] {}));
  r.run_through(std::chrono::milliseconds(20));
  REQUIRE(r.model.lit(5));
  REQUIRE_FALSE(r.model.set_shutter({1}, true));
  CHECK_FALSE(r.model.lit(5));
  CHECK(r.model.power_dbm(1) == -60.0);
  REQUIRE_FALSE(r.model.set_shutter({1}, false));
  CHECK(r.model.lit(5));

  auto p = small(30);
  p.blocking = true;
  Rig b(p);
  REQUIRE_FALSE(b.model.connect({{1, 5}}, [] {}));
  b.run_through(std::chrono::milliseconds(80));
  REQUIRE(b.model.lit(5));
  REQUIRE_FALSE(b.model.connect({{2, 6}}, [] {}));
  CHECK_FALSE(b.model.lit(5));  // blocking: everything dark while a mirror moves
  b.run_through(std::chrono::milliseconds(80));
  CHECK(b.model.lit(5));
  CHECK(b.model.lit(6));
}

TEST_CASE("a request conflicting at both ends names the port of the lower ingress", "[emulator]") {
  Rig r(small(0));
  REQUIRE_FALSE(r.model.connect({{1, 5}, {2, 6}}, [] {}));
  auto err = r.model.connect({{2, 5}}, [] {});  // 5 is held by ingress 1, ingress 2 by 6
  REQUIRE(err);
  CHECK(err->text == "Port already connected: 5");
  err = r.model.connect({{1, 6}}, [] {});  // ingress 1 holds 5, 6 is held by ingress 2
  REQUIRE(err);
  CHECK(err->text == "Port already connected: 1");
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 5}, {2, 6}});
}

// The model announces only what changed since its last announcement (touched ports, not a
// scan of every port): what the observers were last told must always be what lit() says.
TEST_CASE("announced light follows the model through replacing, shutters and blocking", "[emulator]") {
  auto agrees = [](Rig& r) {
    std::map<Port, bool> told;
    for (auto [out, lit] : r.lights) told[out] = lit;
    std::map<Port, std::optional<Port>> path;
    for (auto [in, out] : r.paths) path[in] = out;
    for (Port out = 5; out <= 8; ++out) {
      if (told[out] != r.model.lit(out)) return false;
    }
    const auto circuits = r.model.circuits();
    for (Port in = 1; in <= 4; ++in) {
      std::optional<Port> lit_to;
      for (Port out = 5; out <= 8; ++out) {
        if (r.model.lit(out) && std::count(circuits.begin(), circuits.end(), Circuit{in, out})) {
          lit_to = out;
        }
      }
      if (path[in] != lit_to) return false;
    }
    return true;
  };
  auto p = small(0);
  p.replace_patched = true;
  Rig r(p);
  REQUIRE_FALSE(r.model.connect({{1, 5}, {2, 6}, {3, 7}}, [] {}));
  r.run_through(std::chrono::milliseconds(20));
  CHECK(agrees(r));
  REQUIRE_FALSE(r.model.connect({{4, 5}, {1, 8}}, [] {}));  // 4 takes 5 from 1, 1 moves to 8
  CHECK(agrees(r));
  r.run_through(std::chrono::milliseconds(20));
  CHECK(agrees(r));
  CHECK(r.model.circuits() == std::vector<Circuit>{{1, 8}, {2, 6}, {3, 7}, {4, 5}});
  REQUIRE_FALSE(r.model.set_shutter({6}, true));  // at the egress end
  CHECK_FALSE(r.model.lit(6));
  CHECK(agrees(r));
  REQUIRE_FALSE(r.model.set_shutter({3, 8}, true));
  CHECK(agrees(r));
  REQUIRE_FALSE(r.model.set_shutter({3, 6, 8}, false));
  CHECK(agrees(r));
  CHECK(r.model.lit(6));
  REQUIRE_FALSE(r.model.disconnect({7}));  // by its egress
  CHECK(agrees(r));

  auto pb = small(30);
  pb.blocking = true;
  Rig b(pb);
  REQUIRE_FALSE(b.model.connect({{1, 5}, {2, 6}}, [] {}));
  b.run_through(std::chrono::milliseconds(80));
  CHECK(agrees(b));
  REQUIRE_FALSE(b.model.connect({{3, 7}}, [] {}));
  CHECK_FALSE(b.model.lit(5));
  CHECK(agrees(b));  // every lit circuit announced dark while a mirror moves
  b.run_through(std::chrono::milliseconds(80));
  CHECK(b.model.lit(5));
  CHECK(agrees(b));  // and lit again, with the new one, when it settles
}

TEST_CASE("switch presets follow the published switching times", "[emulator]") {
  CHECK(SwitchParams::preset("polatis-6000").switching.mean_ms() == 25);
  CHECK(SwitchParams::preset("mems-3d").switching.mean_ms() == 10);
  CHECK(SwitchParams::preset("liquid-crystal").switching.mean_ms() == 100);
  CHECK(SwitchParams::preset("rotor").switching.mean_ms() == Approx(0.01));
  CHECK(SwitchParams::preset("robotic-patch-panel").switching.mean_ms() == 120000);
  CHECK_THROWS_WITH(SwitchParams::preset("polatis"),
                    Catch::Contains("unknown switch preset 'polatis'") && Catch::Contains("mems-3d"));
}

}  // namespace switch_model_test
