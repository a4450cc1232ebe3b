// `ocslab plot` in-process over a hand-written results folder (docs/experiments.md columns):
// 2 hosts x 3 reconfigurations with known edges, so the figures' content can be checked through
// --describe and their size through the PNG header. Needs python3-matplotlib (scripts/install-deps).
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/cli/plot.h"
#include "ocslab/common/file.h"
#include "ocslab/testing/sshd_fixture.h"

namespace fs = std::filesystem;
using namespace ocslab::cli;
using nlohmann::json;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'800'000'000'000'000'000;  // ns since the epoch
const std::string kRun = "demo-20261122-220501";

int64_t issue_of(int iteration) { return kT0 + iteration * 10'000 * kMs; }

// When each layer's edge happens, ms after the command; host h2 sees everything 10 ms later.
struct Edges {
  int64_t stalled, lost, fw_down, carrier_down, back, fw_up, carrier_up, resumed;
};
Edges edges_of(int iteration, int host) {
  static const std::map<int, int64_t> kResumed = {{1, 2490}, {2, 1390}, {3, 1690}};  // median: 3
  int64_t o = 10 * host, r = kResumed.at(iteration) + o;
  return {40 + o, 50 + o, 52 + o, 60 + o, 90 + o, 1100 + o, r - 165, r};
}

struct Run {
  int rc;
  std::string out, err;
};

Run plot(std::vector<std::string> args) {
  args.insert(args.begin(), "plot");
  std::ostringstream out, err;
  int rc = run_ocslab(args, out, err);
  return {rc, out.str(), err.str()};
}

struct ResultsFolder {
  ocslab::testing::TempDir tmp;
  std::string dir = tmp.path() + "/" + kRun;

  ResultsFolder() {
    fs::create_directories(dir);
    std::ofstream tl(dir + "/timeline.csv");
    tl << "t_ns,host,source,subject,signal,value,unit,run,iteration\n";
    auto row = [&](int64_t t, const std::string& host, const std::string& src, const std::string& subj,
                   const std::string& sig, double v, const std::string& unit, int it) {
      tl << t << ',' << host << ',' << src << ',' << subj << ',' << sig << ',' << v << ',' << unit << ',' << kRun << ','
         << it << '\n';
    };
    const char* hosts[] = {"h1", "h2"};
    // Warm-up: everything up before the first reconfiguration.
    for (const char* h : hosts) {
      row(kT0 + 1000 * kMs, h, "emulator", "eth1", "light", 1, "bool", 0);
      row(kT0 + 1000 * kMs + 1, h, "emulator", "eth1", "link", 1, "bool", 0);
      row(kT0 + 1000 * kMs + 2, h, "carrier", "eth1", "carrier", 1, "bool", 0);
    }
    std::ofstream bd(dir + "/breakdown.csv");
    bd << "run,iteration,mapping,host,interface,status,issued_ns,acked_ns,light_lost_ns,light_back_ns,"
          "firmware_down_ns,firmware_up_ns,carrier_down_ns,carrier_up_ns,rdma_stalled_ns,rdma_resumed_ns,"
          "control_ms,switching_ms,dark_ms,firmware_ms,carrier_ms,kernel_ms,rdma_ms,outage_ms,total_ms\n";
    for (int it = 1; it <= 3; ++it) {
      int64_t t = issue_of(it);
      std::string mapping = "ring-" + std::to_string(it);
      // Rows are written in time order per host; the script sorts the whole file by t_ns.
      row(t, "switch", "ocs", mapping, "command", 1, "bool", it);
      row(t + 45 * kMs, "switch", "ocs", mapping, "ack", 1, "bool", it);
      for (int k = 0; k < 2; ++k) {
        const std::string h = hosts[k], pair = "rxe_eth1/eth1@" + std::string(hosts[1 - k]);
        Edges e = edges_of(it, k);
        row(t + e.stalled * kMs, h, "rdma", pair, "stalled", 1, "bool", it);
        row(t + e.lost * kMs, h, "emulator", "eth1", "light", 0, "bool", it);
        row(t + e.fw_down * kMs, h, "emulator", "eth1", "link", 0, "bool", it);
        row(t + e.carrier_down * kMs, h, "carrier", "eth1", "carrier", 0, "bool", it);
        row(t + e.back * kMs, h, "emulator", "eth1", "light", 1, "bool", it);
        row(t + e.fw_up * kMs, h, "emulator", "eth1", "link", 1, "bool", it);
        row(t + e.carrier_up * kMs, h, "carrier", "eth1", "carrier", 1, "bool", it);
        row(t + e.resumed * kMs, h, "rdma", pair, "resumed", double(e.resumed - e.stalled), "ms", it);
        auto ns = [&](int64_t ms) { return std::to_string(t + ms * kMs); };
        bd << kRun << ',' << it << ',' << mapping << ',' << h << ",eth1,ok," << t << ',' << ns(45) << ',' << ns(e.lost)
           << ',' << ns(e.back) << ',' << ns(e.fw_down) << ',' << ns(e.fw_up) << ',' << ns(e.carrier_down) << ','
           << ns(e.carrier_up) << ',' << ns(e.stalled) << ',' << ns(e.resumed) << ",45," << e.back << ','
           << e.back - e.lost << ',' << e.fw_up - e.back << ',' << e.carrier_up - e.back << ','
           << e.carrier_up - e.fw_up << ',' << e.resumed - e.carrier_up << ',' << e.resumed - e.stalled << ','
           << e.resumed << '\n';
      }
    }
  }
};

// Width and height from a PNG's IHDR chunk; fails the test when the file is not a PNG.
std::pair<uint32_t, uint32_t> png_size(const std::string& path) {
  std::string b = ocslab::read_file_or_empty(path);
  REQUIRE(b.size() > 24);
  REQUIRE(b.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  REQUIRE(b.substr(12, 4) == "IHDR");
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

const json& edges(const json& d, const std::string& host, const std::string& layer) {
  return d.at("hosts").at(host).at("interfaces").at("eth1").at(layer).at("edges");
}

}  // namespace

TEST_CASE("ocslab plot draws both figures at their documented size", "[plot]") {
  ResultsFolder f;
  Run r = plot({f.dir});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::Contains("iteration 3"));
  // 110 px of title and axis + per host 40 px + 46 px per lane (control, light, firmware, carrier, rdma).
  CHECK(png_size(f.dir + "/timeline.png") == std::pair<uint32_t, uint32_t>{1400, 110 + 2 * (40 + 5 * 46)});
  CHECK(png_size(f.dir + "/cdf.png") == std::pair<uint32_t, uint32_t>{1000, 600});
}

TEST_CASE("ocslab plot --describe reports the median reconfiguration and every edge", "[plot]") {
  ResultsFolder f;
  Run r = plot({f.dir, "--describe"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  json d = json::parse(r.out);
  CHECK(d.at("iteration") == 3);  // totals per iteration 2500, 1400, 1700: the median is 1700
  CHECK(d.at("run") == kRun);
  CHECK(d.at("mapping") == "ring-3");
  CHECK(d.at("issue_t_ns").get<int64_t>() == issue_of(3));
  CHECK(d.at("ack_ms") == 45.0);
  CHECK(d.at("window_ms").at(0) == -200.0);
  CHECK(d.at("window_ms").at(1) == 1700.0 + 500.0);  // last edge: h2's rdma resumed
  REQUIRE(d.at("hosts").size() == 2);
  for (const char* h : {"h1", "h2"}) {
    // One RDMA lane per queue pair, named by its peer.
    std::string rdma_lane = std::string("rdma @") + (h == std::string("h1") ? "h2" : "h1");
    CHECK(d.at("hosts").at(h).at("lanes") == json({"control", "light", "firmware", "carrier", rdma_lane}));
    for (const std::string layer : {"light", "firmware", "carrier", rdma_lane.c_str()})
      CHECK(d.at("hosts").at(h).at("interfaces").at("eth1").at(layer).at("initial") == 1);
  }
  const json& carrier = edges(d, "h1", "carrier");
  REQUIRE(carrier.size() == 2);
  CHECK(carrier[0] == json({{"t_ms", 60.0}, {"to", 0}}));
  CHECK(carrier[1] == json({{"t_ms", 1525.0}, {"to", 1}}));
  CHECK(edges(d, "h2", "carrier")[1].at("t_ms") == 1535.0);
  CHECK(edges(d, "h1", "light") == json::parse(R"([{"t_ms":50.0,"to":0},{"t_ms":90.0,"to":1}])"));
  CHECK(edges(d, "h1", "firmware")[1].at("t_ms") == 1100.0);
  const json& rdma = edges(d, "h2", "rdma @h1");
  REQUIRE(rdma.size() == 2);
  CHECK(rdma[0].at("t_ms") == 50.0);
  CHECK(rdma[1].at("t_ms") == 1700.0);
  CHECK(rdma[1].at("gap_ms") == 1650.0);

  std::map<std::string, json> series;
  for (const auto& s : d.at("cdf").at("series")) series[s.at("column")] = s;
  CHECK(series.size() == 5);
  CHECK(series.at("total_ms").at("n") == 6);
  CHECK(series.at("total_ms").at("median_ms") == 1695.0);  // 1390 1400 1690 1700 2490 2500
  CHECK(series.at("carrier_ms").at("median_ms") == 1435.0);
  CHECK(series.at("switching_ms").at("median_ms") == 95.0);
  CHECK(d.at("cdf").at("log_x") == false);
  CHECK(d.at("timeline").at("size_px") == json({1400, 650}));
}

TEST_CASE("ocslab plot --iteration picks another reconfiguration and carries the state before it", "[plot]") {
  ResultsFolder f;
  Run r = plot({f.dir, "--iteration", "2", "--describe"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  json d = json::parse(r.out);
  CHECK(d.at("iteration") == 2);
  CHECK(d.at("issue_t_ns").get<int64_t>() == issue_of(2));
  CHECK(edges(d, "h1", "carrier")[1].at("t_ms") == 1390.0 - 165.0);
  CHECK(edges(d, "h1", "rdma @h2")[1].at("t_ms") == 1390.0);
  // Iteration 1's rows are before the window: every lane starts up, not at the first edge's level.
  CHECK(d.at("hosts").at("h2").at("interfaces").at("eth1").at("carrier").at("initial") == 1);
}

TEST_CASE("ocslab plot reads an ocslab-agent capture's seven columns (no run, no iteration)", "[plot]") {
  ResultsFolder f;
  std::istringstream full(ocslab::read_file_or_empty(f.dir + "/timeline.csv"));
  std::ofstream seven(f.dir + "/timeline.csv");
  for (std::string line; std::getline(full, line);) {
    for (int cut = 0; cut < 2; ++cut) line.erase(line.rfind(','));
    seven << line << '\n';
  }
  seven.close();
  Run r = plot({f.dir, "--describe"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  json d = json::parse(r.out);
  CHECK(d.at("iteration") == 3);
  CHECK(d.at("run") == kRun);                               // from breakdown.csv
  CHECK(d.at("issue_t_ns").get<int64_t>() == issue_of(3));  // the third `ocs` `command`
  CHECK(edges(d, "h1", "carrier")[1].at("t_ms") == 1525.0);
}

TEST_CASE("ocslab plot --format svg writes SVG files", "[plot]") {
  ResultsFolder f;
  Run r = plot({f.dir, "--format", "svg"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(ocslab::read_file_or_empty(f.dir + "/timeline.svg"), Catch::Contains("<svg"));
  CHECK_THAT(ocslab::read_file_or_empty(f.dir + "/cdf.svg"), Catch::Contains("<svg"));
  CHECK_FALSE(fs::exists(f.dir + "/timeline.png"));
}

TEST_CASE("ocslab plot names the missing file, column or iteration", "[plot]") {
  ResultsFolder f;
  SECTION("no breakdown.csv") {
    fs::remove(f.dir + "/breakdown.csv");
    Run r = plot({f.dir});
    CHECK(r.rc == kExitInput);
    CHECK_THAT(r.err, Catch::Contains(f.dir + "/breakdown.csv"));
  }
  SECTION("an iteration that is not there") {
    Run r = plot({f.dir, "--iteration", "7"});
    CHECK(r.rc == kExitInput);
    CHECK_THAT(r.err, Catch::Contains("iteration 7 not present") && Catch::Contains("breakdown.csv"));
  }
  SECTION("a timeline without a required column") {
    std::ofstream(f.dir + "/timeline.csv") << "t_ns,host,source,subject,signal\n1,h1,carrier,eth1,carrier\n";
    Run r = plot({f.dir});
    CHECK(r.rc == kExitInput);
    CHECK_THAT(r.err, Catch::Contains("timeline.csv:1: missing column(s) value"));
  }
  SECTION("no such folder") {
    Run r = plot({f.dir + "-nope"});
    CHECK(r.rc == kExitInput);
    CHECK_THAT(r.err, Catch::Contains(f.dir + "-nope"));
  }
  SECTION("a bad command line is exit 1 before any file is read") {
    CHECK(plot({f.dir, "--iteration", "x"}).rc == kExitUsage);
    CHECK(plot({f.dir, "--format", "jpg"}).rc == kExitUsage);
    CHECK(plot({f.dir, "--bogus"}).rc == kExitUsage);
    CHECK(plot({}).rc == kExitUsage);
  }
  CHECK_FALSE(fs::exists(f.dir + "/timeline.png"));
}

TEST_CASE("draw_plots is what the runner calls after a run", "[plot]") {
  ResultsFolder f;
  std::ostringstream err;
  CHECK(draw_plots(f.dir, err) == kExitOk);
  CHECK(err.str().empty());
  CHECK(png_size(f.dir + "/timeline.png").first == 1400);
  fs::remove(f.dir + "/timeline.csv");
  std::ostringstream err2;
  CHECK(draw_plots(f.dir, err2) == kExitInput);
  CHECK_THAT(err2.str(), Catch::Contains("timeline.csv: no such file"));
}

TEST_CASE("ocslab plot --help documents the figures and the exit codes", "[plot]") {
  Run r = plot({"--help"});
  CHECK(r.rc == kExitOk);
  for (const char* s :
       {"timeline.png", "cdf.png", "--iteration", "--describe", "--format", "OCSLAB_PYTHON", "Exit codes"})
    CHECK_THAT(r.out, Catch::Contains(s));
  std::ostringstream out, err;
  run_ocslab({"--help"}, out, err);
  CHECK_THAT(out.str(), Catch::Contains("plot"));
}
