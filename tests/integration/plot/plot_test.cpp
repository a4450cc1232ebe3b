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
  // 88 + 52 px of title, legend and axes + per host 40 px + 46 px per lane (control, light,
  // firmware, carrier, rdma); 1200 px at most (tests/integration/plot/test_figures.py).
  CHECK(png_size(f.dir + "/timeline.png") == std::pair<uint32_t, uint32_t>{1400, 88 + 52 + 2 * (40 + 5 * 46)});
  // A 500 px plot, 48 + 64 px around it and the legend under it: 5 series, two a row.
  CHECK(png_size(f.dir + "/cdf.png") == std::pair<uint32_t, uint32_t>{1000, 48 + 500 + 64 + 3 * 20});
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
  CHECK(d.at("window_ms").at(0) == -50.0);           // 5% of the span after the command, at most 50 ms
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
  CHECK(d.at("timeline").at("size_px") == json({1400, 680}));
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
  SECTION("a bad command line is exit 1, a bad value exit 2, before any file is read") {
    CHECK(plot({f.dir, "--iteration", "x"}).rc == kExitInput);
    CHECK(plot({f.dir, "--format", "jpg"}).rc == kExitInput);
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

namespace {

// A phase-workload folder with only the files the runner adds for the idle windows and the
// switching-latency sweep (docs/experiments.md, "Idle windows", "Switching-latency sweep plots").
struct PhaseFolder {
  ocslab::testing::TempDir tmp;
  std::string dir = tmp.path() + "/dp-pp-phases-20261126-230000";
  PhaseFolder() { fs::create_directories(dir); }
  void windows() const {
    std::ofstream(dir + "/windows.csv")
        << "mode,group,rank,members,from_step,from_op,step,to_op,window_ms,switching_ms,hides_switch\n"
           "on-demand,dp-s0,1,2,1,0,1,4,25.000,100.000,0\n"
           "on-demand,pp0,2,2,1,2,2,0,988.000,100.000,1\n"
           "provisioning,dp-s0,1,2,1,0,1,4,150.000,100.000,1\n"
           "provisioning,pp0,2,2,1,2,2,0,300.000,100.000,1\n"
           "provisioning,dp-s0,0,2,2,0,2,4,50.000,100.000,0\n";
  }
  void sweep() const {
    std::ofstream(dir + "/sweep.csv")
        << "mode,switching_ms,repetition,steps,step_ms,step_ms_sd,relative_to_native,reconfigs_per_step,estimate_ms\n"
           "native,,1,6,100.0,2.0,1.00,0,\n"
           "native,,2,6,110.0,2.0,1.00,0,\n"
           "on-demand,100,1,6,420.0,5.0,4.00,3,405\n"
           "on-demand,10,1,6,140.0,3.0,1.33,3,135\n"
           "on-demand,10,2,6,150.0,3.0,1.43,3,135\n"
           "provisioning,10,1,6,112.0,1.5,1.07,3,135\n";
  }
};

}  // namespace

TEST_CASE("ocslab plot draws windows.png: the idle-window CDF per mode", "[plot]") {
  PhaseFolder f;
  f.windows();
  Run r = plot({f.dir, "--describe"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  // two series and the switching time: two legend rows
  CHECK(png_size(f.dir + "/windows.png") == std::pair<uint32_t, uint32_t>{1000, 48 + 500 + 64 + 2 * 20});
  CHECK(fs::file_size(f.dir + "/windows.png") > 10000);  // a drawn figure, not an empty canvas
  CHECK_FALSE(fs::exists(f.dir + "/phase.png"));         // no phase-steps.csv in this folder
  json d = json::parse(r.out);
  const json& w = d.at("windows");
  CHECK(w.at("switching_ms") == json({100.0}));
  REQUIRE(w.at("series").size() == 2);
  CHECK(w.at("series")[0].at("mode") == "on-demand");
  CHECK(w.at("series")[0].at("n") == 2);
  CHECK(w.at("series")[0].at("hiding_fraction") == 0.5);
  CHECK(w.at("series")[0].at("median_ms") == 506.5);
  CHECK(w.at("series")[1].at("n") == 3);
  CHECK(w.at("series")[1].at("hiding_fraction").get<double>() == Approx(2.0 / 3));
  CHECK(w.at("series")[1].at("median_ms") == 150.0);
  CHECK_FALSE(d.contains("sweep"));
}

TEST_CASE("ocslab plot draws sweep.png: step time vs switching latency, native and the estimate", "[plot]") {
  PhaseFolder f;
  f.sweep();
  Run r = plot({f.dir, "--describe"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  // two modes measured and estimated, and native: three legend rows
  CHECK(png_size(f.dir + "/sweep.png") == std::pair<uint32_t, uint32_t>{1000, 48 + 500 + 64 + 3 * 20});
  CHECK(fs::file_size(f.dir + "/sweep.png") > 10000);
  json d = json::parse(r.out);
  const json& s = d.at("sweep");
  CHECK(s.at("native_ms") == 105.0);  // mean of every native row
  CHECK(s.at("native_rows") == 2);
  REQUIRE(s.at("series").size() == 2);
  const json& od = s.at("series")[0];
  CHECK(od.at("mode") == "on-demand");
  REQUIRE(od.at("points").size() == 2);  // in increasing switching time, whatever the file's order
  CHECK(od.at("points")[0] == json({{"switching_ms", 10.0},
                                    {"repetitions", 2},
                                    {"step_ms", 145.0},
                                    {"low_ms", 140.0},
                                    {"high_ms", 150.0},
                                    {"estimate_ms", 135.0}}));
  CHECK(od.at("points")[1].at("switching_ms") == 100.0);
  CHECK(od.at("points")[1].at("estimate_ms") == 405.0);
  // one repetition: the error bar is its steps' standard deviation
  const json& prov = s.at("series")[1].at("points")[0];
  CHECK(prov.at("low_ms") == 110.5);
  CHECK(prov.at("high_ms") == 113.5);
}

TEST_CASE("ocslab plot draws a link-rate sweep.png: step time vs link rate per mode, native included",
          "[plot][link-rate]") {
  PhaseFolder f;
  std::ofstream(f.dir + "/sweep.csv")
      << "mode,switching_ms,repetition,steps,step_ms,step_ms_sd,relative_to_native,reconfigs_per_step,wait_ms,"
         "barriers_per_step,estimate_ms,link_gbps,algbw_gbps\n"
         "native,,1,2,900.000,10.000,1.0,0,0,0,,0.002,0.0018\n"
         "native,,1,2,250.000,5.000,1.0,0,0,0,,0.02,0.0075\n"
         "on-demand,25.000,1,2,950.000,10.000,1.05,1,30,1,925.000,0.002,0.0017\n"
         "on-demand,25.000,1,2,300.000,4.000,1.2,1,30,1,275.000,0.02,0.0070\n";
  Run r = plot({f.dir, "--describe"});
  INFO(r.err);
  REQUIRE(r.rc == kExitOk);
  CHECK(png_size(f.dir + "/sweep.png") == std::pair<uint32_t, uint32_t>{1000, 48 + 500 + 64 + 1 * 20});
  json d = json::parse(r.out);
  const json& s = d.at("sweep");
  CHECK(s.at("axis") == "link_gbps");
  CHECK(s.at("log_x") == false);  // a 10x span
  REQUIRE(s.at("series").size() == 2);
  CHECK(s.at("series")[0].at("mode") == "native");
  const json& p = s.at("series")[1].at("points");
  REQUIRE(p.size() == 2);
  CHECK(p[0] == json({{"link_gbps", 0.002},
                      {"repetitions", 1},
                      {"step_ms", 950.0},
                      {"low_ms", 940.0},
                      {"high_ms", 960.0},
                      {"algbw_gbps", 0.0017}}));
  CHECK(p[1].at("link_gbps") == 0.02);
}

TEST_CASE("ocslab plot draws phase.png, windows.png and sweep.png together, and names a bad sweep.csv", "[plot]") {
  PhaseFolder f;
  f.windows();
  f.sweep();
  std::ofstream(f.dir + "/phase-steps.csv")
      << "mode,step,warmup,rank,step_ms,compute_ms,comm_ms,wait_ms,max_wait_ms,reconfigurations,reconfigured_ops,rows\n"
         "on-demand,0,1,0,50,20,20,10,10,2,2,8\n"
         "on-demand,1,0,1,40,20,15,5,5,2,2,8\n";
  std::ostringstream err;
  CHECK(draw_plots(f.dir, err) == kExitOk);  // what the runner calls on the folder
  INFO(err.str());
  for (const char* png : {"/phase.png", "/windows.png", "/sweep.png"}) CHECK(png_size(f.dir + png).first > 0);
  std::ofstream(f.dir + "/sweep.csv") << "mode,switching_ms,step_ms\non-demand,10,100\n";
  Run r = plot({f.dir});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("sweep.csv:1: missing column(s) repetition"));
}
