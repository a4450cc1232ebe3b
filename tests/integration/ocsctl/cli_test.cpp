// ocsctl end to end: the CLI function in-process against the TL1 grammar peer over loopback
// TCP, and the real binary for exit codes.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ocslab/common/csv_reader.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/ocsctl/credentials.h"
#include "ocslab/testing/peers.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/testing/wait.h"
#include "ocslab/tool/cli.h"

using namespace ocslab;
using namespace ocslab::ocs;
using ocslab::testing::PeerProtocol;
using ocslab::testing::PeerSwitch;
using ocslab::testing::TcpPeer;

namespace {

struct Run {
  int rc;
  std::string out, err;
};

struct CliFixture {
  PeerSwitch sw{16, 16};
  TcpPeer peer;
  std::string url;

  explicit CliFixture(testing::PeerQuirks quirks = {})
      : peer(PeerProtocol::kTl1, sw, quirks), url("tl1://admin@127.0.0.1:" + std::to_string(peer.port())) {
    ::setenv(kPasswordEnv, "root", 1);
  }
  ~CliFixture() { ::unsetenv(kPasswordEnv); }

  Run run(std::vector<std::string> args) {
    args.insert(args.begin(), {"-s", url, "--timeout-ms", "3000"});
    std::ostringstream out, err;
    int rc = run_ocsctl(args, out, err);
    return {rc, out.str(), err.str()};
  }
  bool sent(const std::string& verb) {
    for (const auto& h : sw.history()) {
      if (h.find(verb) != std::string::npos) return true;
    }
    return false;
  }
};

}  // namespace

TEST_CASE("ocsctl help covers every command and the exit codes", "[cli]") {
  std::ostringstream out, err;
  REQUIRE(run_ocsctl({"--help"}, out, err) == kExitOk);
  for (const char* c : {"info", "list", "connect", "disconnect", "apply", "clear", "power", "watch-power", "bench"}) {
    CHECK_THAT(out.str(), Catch::Contains(std::string("  ") + c));
    std::ostringstream o2, e2;
    REQUIRE(run_ocsctl({c, "--help"}, o2, e2) == kExitOk);
    CHECK_THAT(o2.str(), Catch::Contains(std::string("Usage: ocsctl -s URL [options] ") + c));
    CHECK_THAT(o2.str(), Catch::Contains("Exit codes:"));
  }
  CHECK_THAT(out.str(), Catch::Contains("OCSLAB_OCS_PASSWORD"));
  std::ostringstream o3, e3;
  CHECK(run_ocsctl({"--password", "x", "list"}, o3, e3) == kExitUsage);
  CHECK(run_ocsctl({"frobnicate"}, o3, e3) == kExitUsage);
  CHECK_THAT(e3.str(), Catch::Contains("unknown command 'frobnicate'"));
}

TEST_CASE("docs/ocsctl.md shows every command as its help does and names every global option", "[cli][docs]") {
  std::ifstream f(std::string(OCSLAB_TEST_SOURCE_DIR) + "/docs/ocsctl.md");
  REQUIRE(f);
  std::stringstream doc;
  doc << f.rdbuf();
  // The usage line of each command (optional, defaulted options in brackets) is its row.
  for (const char* c : {"info", "list", "connect", "disconnect", "apply", "clear", "power", "watch-power", "bench"}) {
    std::ostringstream out, err;
    REQUIRE(run_ocsctl({c, "--help"}, out, err) == kExitOk);
    const std::string prefix = "Usage: ocsctl -s URL [options] ";
    std::string usage = out.str().substr(prefix.size());
    usage = usage.substr(0, usage.find('\n'));
    CHECK_THAT(doc.str(), Catch::Contains("| `" + usage + "` |"));
  }
  // Every long option of the global section of `ocsctl --help`.
  std::ostringstream out, err;
  REQUIRE(run_ocsctl({"--help"}, out, err) == kExitOk);
  std::string help = out.str();
  auto begin = help.find("Global options:"), end = help.find("Command options:");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::istringstream global(help.substr(begin, end - begin));
  int options = 0;
  for (std::string line; std::getline(global, line);) {
    auto dash = line.find("--");
    if (dash == std::string::npos || line.find_first_not_of(' ') != line.find('-')) continue;  // a description line
    std::string name = line.substr(dash, line.find_first_of(" ]", dash) - dash);
    ++options;
    CHECK_THAT(doc.str(), Catch::Contains("`" + name) || Catch::Contains(", " + name));
  }
  CHECK(options >= 13);
}

TEST_CASE("ocsctl drives a TL1 switch: connect, list, power, disconnect", "[cli]") {
  CliFixture f;
  auto r = f.run({"connect", "1-17", "2-18"});
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::Contains("made 2 circuit(s): 1-17 2-18"));
  r = f.run({"--json", "list"});
  REQUIRE(r.rc == kExitOk);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["circuits"].size() == 2);
  CHECK(j["circuits"][0]["ingress"] == 1);
  CHECK(j["circuits"][0]["egress"] == 17);
  r = f.run({"--csv", "power", "17..18"});
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::StartsWith("port,dbm\n17,"));
  r = f.run({"disconnect", "17"});
  REQUIRE(r.rc == kExitOk);
  CHECK(f.sw.circuits() == std::vector<Circuit>{{2, 18}});
  r = f.run({"--json", "info"});
  REQUIRE(r.rc == kExitOk);
  CHECK(nlohmann::json::parse(r.out)["ingress_ports"] == 16);
}

TEST_CASE("ocsctl apply: dry run sends no change, replace makes the minimal diff", "[cli]") {
  CliFixture f;
  REQUIRE(f.sw.connect({{1, 17}, {2, 18}, {3, 19}}, false).empty());
  testing::TempDir dir;
  std::string mapping = dir.path() + "/m.yaml";
  std::ofstream(mapping) << "circuits:\n  - 1-17\n  - 2-19\n";
  f.sw.clear_history();
  auto r = f.run({"apply", mapping, "--replace", "--dry-run"});
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::Contains("remove: 2-18 3-19"));
  CHECK_THAT(r.out, Catch::Contains("add:    2-19"));
  CHECK_THAT(r.out, Catch::Contains("dry run: nothing sent"));
  CHECK_THAT(r.out, Catch::Contains("  DLT-PATCH::2&3:<ctag>:;\n  ENT-PATCH::2,19:<ctag>:;"));
  CHECK_FALSE(f.sent("ENT-PATCH"));
  CHECK_FALSE(f.sent("DLT-PATCH"));
  r = f.run({"--json", "apply", mapping, "--replace"});
  REQUIRE(r.rc == kExitOk);
  CHECK(f.sw.circuits() == std::vector<Circuit>{{1, 17}, {2, 19}});
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["add"].size() == 1);
  CHECK(j["remove"].size() == 2);
}

TEST_CASE("ocsctl refuses bad input before sending anything", "[cli]") {
  CliFixture f;
  testing::TempDir dir;
  std::string mapping = dir.path() + "/bad.yaml";
  std::ofstream(mapping) << "circuits:\n  - 1-17\n  - 1-18\n";
  auto r = f.run({"apply", mapping});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains(mapping + ":3:5: port 1 used twice as ingress"));
  f.sw.clear_history();
  r = f.run({"--allow", "1..4,17..20", "connect", "5-21"});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("port 5 is outside the allow-list (1..4,17..20)"));
  CHECK_FALSE(f.sent("ENT-PATCH"));
  r = f.run({"connect", "1-99"});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("unknown port 99"));
  r = f.run({"connect", "17-1"});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("not an ingress port"));
  r = f.run({"clear"});
  CHECK(r.rc == kExitUsage);
  CHECK_THAT(r.err, Catch::Contains("--yes"));
  r = f.run({"connect", "1:17"});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("bad circuit '1:17'"));
}

TEST_CASE("ocsctl maps switch refusals and dead switches to exit codes", "[cli]") {
  CliFixture f;
  REQUIRE(f.sw.connect({{1, 17}}, false).empty());
  auto r = f.run({"connect", "1-18"});  // already patched: the peer denies
  CHECK(r.rc == kExitRefused);
  CHECK_THAT(r.err, Catch::Contains(f.url));
  r = f.run({"connect", "--replace", "1-18"});
  CHECK(r.rc == kExitOk);
  CHECK(f.sw.circuits() == std::vector<Circuit>{{1, 18}});
  std::ostringstream out, err;
  int port = testing::free_loopback_port();
  int rc = run_ocsctl({"-s", "tl1://admin@127.0.0.1:" + std::to_string(port), "--connect-timeout-ms", "1000", "list"},
                      out, err);
  CHECK(rc == kExitUnreachable);
  CHECK_THAT(err.str(), Catch::Contains("127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("ocsctl bench alternates two mappings and writes every call", "[cli]") {
  CliFixture f;
  REQUIRE(f.sw.connect({{5, 21}}, false).empty());  // someone else's circuit: must survive
  testing::TempDir dir;
  std::string csv = dir.path() + "/bench.csv";
  auto r = f.run({"bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17", "--toggles", "6", "-o", csv});
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::Contains("reconfiguration      6"));
  // The header: mean and stdev, no p90 or p99 for 6 samples (they would be the maximum).
  CHECK_THAT(r.out, Catch::Contains("n      mean     stdev       min    median       p90       p99       max"));
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*reconfiguration +6 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +- +- +[0-9.]+\n(.|\n)*"));
  // Back on what the bench found on its ports (nothing), someone else's circuit untouched.
  CHECK_THAT(r.out, Catch::Contains("switch back on the 0 circuit(s) it had on these ports"));
  CHECK(f.sw.circuits() == std::vector<Circuit>{{5, 21}});
  std::ifstream in(csv);
  std::string line;
  int rows = 0, changes = 0;
  std::getline(in, line);
  CHECK(line == "toggle,target,op,command,issued_ns,acked_ns,latency_ms,ok");
  while (std::getline(in, line)) {
    ++rows;
    if (line.find(",disconnect,") != std::string::npos || line.find(",connect,") != std::string::npos) ++changes;
  }
  CHECK(changes == 12);  // each toggle: one batched delete + one batched make (the warm-up's are not timed)
  CHECK(rows == 18);     // plus one read of the current circuits per toggle

  // --no-restore: the switch stays on the last mapping (B after 6 toggles).
  r = f.run({"bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17", "--toggles", "6", "--no-restore", "-o", csv});
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::Contains("switch left on the last mapping (--no-restore)"));
  CHECK(f.sw.circuits() == std::vector<Circuit>{{1, 18}, {2, 17}, {5, 21}});
  // And a mapping it found on its ports comes back: B here, after an odd count that ends on A.
  r = f.run({"bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17", "--toggles", "3", "--warmup", "3", "-o", csv});
  REQUIRE(r.rc == kExitOk);
  CHECK_THAT(r.out, Catch::Contains("switch back on the 2 circuit(s) it had on these ports"));
  CHECK(f.sw.circuits() == std::vector<Circuit>{{1, 18}, {2, 17}, {5, 21}});
  r = f.run({"bench", "--pairs", "1-17,2-18", "--toggles", "2", "--warmup=-1", "-o", csv});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("--warmup must be 0 or more"));
}

TEST_CASE("ocsctl bench to a full disk fails naming the file", "[cli]") {
  CliFixture f;
  // /dev/full answers every write with ENOSPC; 6 toggles' rows sit in the buffer until the end.
  auto r = f.run({"bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17", "--toggles", "6", "-o", "/dev/full"});
  CHECK(r.rc == kExitInput);
  CHECK_THAT(r.err, Catch::Contains("cannot write CSV output '/dev/full'"));
  CHECK_THAT(r.out, !Catch::Contains("calls written to"));
}

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("ocsctl bench: a toggle that fails keeps the earlier toggles' rows and statistics", "[cli][bench]") {
  // The switch works for the start and three toggles (4 ENT-PATCH), then fails toggle 4's.
  testing::PeerQuirks q;
  q.faults_after = 4;
  bool drop = GENERATE(false, true);
  (drop ? q.drop_on : q.deny_on) = "ENT-PATCH";
  CAPTURE(drop);
  CliFixture f(q);
  testing::TempDir dir;
  std::string csv = dir.path() + "/bench.csv";
  // No warm-up: the fault is placed by the count of ENT-PATCH commands.
  auto r = f.run({"bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17", "--toggles", "10", "--warmup", "0", "-o", csv});
  CHECK(r.rc == kExitFailed);  // a reconfiguration failed part-way, as the exit-code table says
  CHECK_THAT(r.out, Catch::Contains("reconfiguration      3"));
  CHECK_THAT(r.out, Catch::Contains("calls written to " + csv));
  CHECK_THAT(r.err, Catch::Contains("bench stopped at toggle 4 of 10 (3 completed)"));
  CHECK_THAT(r.err, Catch::Contains(drop ? "connection closed" : "Command refused by the switch"));
  auto lines = read_lines(csv);
  REQUIRE(lines.size() > 10);
  CHECK(lines[0] == "toggle,target,op,command,issued_ns,acked_ns,latency_ms,ok");
  std::map<std::string, int> per_toggle;
  for (size_t i = 1; i < lines.size(); ++i) ++per_toggle[lines[i].substr(0, lines[i].find(','))];
  CHECK(per_toggle["0"] == 3);  // list, disconnect, connect
  CHECK(per_toggle["1"] == 3);
  CHECK(per_toggle["2"] == 3);
  CHECK(per_toggle.size() == 4);
  // The failed toggle's calls: the disconnect that worked, the connect that failed (ok 0).
  bool disconnect_ok = false, connect_failed = false;
  for (const auto& l : lines) {
    auto row = split_csv_line(l);  // toggle,target,op,command,issued_ns,acked_ns,latency_ms,ok
    REQUIRE(row.size() == 8);
    if (row[0] != "3") continue;
    if (row[2] == "disconnect" && row[3].rfind("DLT-PATCH", 0) == 0 && row[7] == "1") disconnect_ok = true;
    if (row[2] == "connect" && row[3].rfind("ENT-PATCH", 0) == 0 && row[7] == "0") connect_failed = true;
  }
  CHECK(disconnect_ok);
  CHECK(connect_failed);
}

TEST_CASE("ocsctl bench without -o writes into results/, never the current folder's top", "[cli][bench]") {
  CliFixture f;
  testing::TempDir dir;
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());  // the bench's folder; restored before any check
  auto r = f.run({"bench", "--pairs", "1-17,2-18", "--toggles", "2", "--warmup", "0"});
  std::filesystem::current_path(before);
  INFO(r.out << r.err);
  CHECK(r.rc == kExitOk);
  std::vector<std::string> top, in_results;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) top.push_back(e.path().filename());
  CHECK(top == std::vector<std::string>{"results"});
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/results"))
    in_results.push_back(e.path().filename());
  REQUIRE(in_results.size() == 1);
  CHECK_THAT(in_results[0], Catch::Matches(R"(ocsctl-bench-\d{8}-\d{6}\.csv)"));
  CHECK_THAT(r.out, Catch::Contains("calls written to results/" + in_results[0]));
  CHECK(read_lines(dir.path() + "/results/" + in_results[0]).size() > 1);
}

TEST_CASE("ocsctl bench --json: one document with the completed toggles and the failure", "[cli][bench]") {
  testing::PeerQuirks q;
  q.faults_after = 3;
  q.deny_on = "ENT-PATCH";
  CliFixture f(q);
  testing::TempDir dir;
  auto r = f.run({"--json", "bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17", "--toggles", "5", "--warmup",
                  "0", "-o", dir.path() + "/b.csv"});
  CHECK(r.rc == kExitFailed);
  auto j = nlohmann::json::parse(r.out);  // a single document: throws on two
  CHECK(j["completed"] == 2);
  CHECK(j["reconfiguration"]["n"] == 2);
  CHECK(j["interrupted"] == false);
  CHECK_THAT(j["error"].get<std::string>(), Catch::Contains("Command refused"));
  CHECK(j["exit_code"] == r.rc);
  CHECK(j["state_known"] == true);
  CHECK(j["reconfiguration"]["mean_ms"].get<double>() > 0);
  CHECK(j["reconfiguration"]["p90_ms"].is_null());  // 2 samples support no percentile
  CHECK(j["restored"] == true);                     // taking circuits down needs no ENT-PATCH
}

TEST_CASE("ocsctl bench: Ctrl-C stops between toggles with every row written, exit 130", "[cli][bench]") {
  testing::PeerQuirks q;
  q.reply_delay_ms = 1;  // about 3 ms a toggle: it is still running when the signal comes
  CliFixture f(q);
  testing::TempDir dir;
  std::string csv = dir.path() + "/bench.csv", out = dir.path() + "/out.txt", err = dir.path() + "/err.txt";
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string bin = testing::bin_path("ocsctl");
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execl(bin.c_str(), bin.c_str(), "-s", f.url.c_str(), "bench", "--pairs", "1-17,2-18", "--pairs", "1-18,2-17",
            "--toggles", "1000000", "-o", csv.c_str(), nullptr);
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  struct Reaper {  // a failed REQUIRE must not leave a million-toggle bench running
    pid_t& pid;
    ~Reaper() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid};
  // Rows reach the file toggle by toggle: wait for a few toggles' worth, then interrupt.
  testing::poll_until([&] { return read_lines(csv).size() >= 31; }, std::chrono::seconds(60));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = -1;
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kExitInterrupted);
  std::string text = ocslab::read_file_or_empty(csv);
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');  // no half-written row
  auto lines = read_lines(csv);
  REQUIRE(lines.size() > 30);
  size_t rows = lines.size() - 1;
  CHECK(rows % 3 == 0);  // whole toggles only
  size_t toggles = rows / 3;
  for (size_t i = 1; i < lines.size(); ++i) {
    CHECK(split_csv_line(lines[i]).size() == 8);
    CHECK(lines[i].rfind(std::to_string((i - 1) / 3) + ",", 0) == 0);  // toggles 0, 1, ... in order
  }
  CHECK_THAT(ocslab::read_file_or_empty(out), Catch::Contains(fmt::format("reconfiguration  {:>5}", toggles)));
  CHECK_THAT(ocslab::read_file_or_empty(err),
             Catch::Contains(fmt::format("bench interrupted after {} of 1000000 toggles", toggles)));
}

TEST_CASE("ocsctl watch-power writes CSV samples", "[cli]") {
  CliFixture f;
  REQUIRE(f.sw.connect({{1, 17}}, false).empty());
  auto r = f.run({"watch-power", "17,18", "--interval-ms", "5", "--count", "3"});
  REQUIRE(r.rc == kExitOk);
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  CHECK(line == "t_ns,port,dbm");
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (line.find(",18,") != std::string::npos) CHECK_THAT(line, Catch::EndsWith("-60.00"));
  }
  CHECK(rows == 6);
}

TEST_CASE("ocsctl watch-power --json writes one object per reading and line", "[cli]") {
  CliFixture f;
  REQUIRE(f.sw.connect({{1, 17}}, false).empty());
  auto r = f.run({"--json", "watch-power", "17,18", "--interval-ms", "5", "--count", "3"});
  REQUIRE(r.rc == kExitOk);
  std::istringstream in(r.out);
  std::map<int, int> per_port;
  int64_t last_t = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);  // throws on anything that is not one object per line
    REQUIRE(j.is_object());
    CHECK(j.size() == 3);
    CHECK(j["t_ns"].get<int64_t>() >= last_t);
    last_t = j["t_ns"].get<int64_t>();
    ++per_port[j["port"].get<int>()];
    if (j["port"] == 18) CHECK(j["dbm"].get<double>() == Approx(-60.0));
  }
  CHECK(per_port == std::map<int, int>{{17, 3}, {18, 3}});
}

TEST_CASE("ocsctl names an unknown command or option and suggests the nearest", "[cli]") {
  CliFixture f;
  auto r = f.run({"lsit"});
  CHECK(r.rc == kExitUsage);
  CHECK_THAT(r.err, Catch::Contains("ocsctl: unknown command 'lsit'. Did you mean 'list'?"));
  r = f.run({"list", "--jsno"});
  CHECK(r.rc == kExitUsage);
  CHECK_THAT(r.err, Catch::Contains("unknown option '--jsno'. Did you mean '--json'?"));
  r = f.run({"watch-power", "17", "--intreval-ms", "5"});
  CHECK(r.rc == kExitUsage);
  CHECK_THAT(r.err, Catch::Contains("Did you mean '--interval-ms'?"));
  r = f.run({"frobnicate"});
  CHECK(r.rc == kExitUsage);
  CHECK_THAT(r.err, Catch::Contains("unknown command 'frobnicate'."));
  CHECK_THAT(r.err, !Catch::Contains("Did you mean"));
}

TEST_CASE("ocsctl --json reports every failure as a JSON object on stdout", "[cli]") {
  CliFixture f;
  auto expect_error = [](const Run& r, int code, const std::string& text) {
    CHECK(r.rc == code);
    INFO(r.out);
    auto j = nlohmann::json::parse(r.out);  // one document, nothing else on stdout
    CHECK(j["exit_code"] == code);
    CHECK_THAT(j["error"].get<std::string>(), Catch::Contains(text));
  };
  expect_error(f.run({"--json", "lsit"}), kExitUsage, "Did you mean 'list'?");
  expect_error(f.run({"--json", "list", "--bogus"}), kExitUsage, "--bogus");
  expect_error(f.run({"--json", "list", "--yes"}), kExitUsage, "does not apply");
  expect_error(f.run({"--json", "connect", "1-99"}), kExitInput, "99");
  REQUIRE(f.sw.connect({{1, 17}}, false).empty());
  expect_error(f.run({"--json", "connect", "1-18"}), kExitRefused, "");
  std::ostringstream out, err;
  int port = testing::free_loopback_port();
  int rc = run_ocsctl(
      {"--json", "-s", "tl1://admin@127.0.0.1:" + std::to_string(port), "--connect-timeout-ms", "1000", "list"}, out,
      err);
  expect_error({rc, out.str(), err.str()}, kExitUnreachable, "127.0.0.1");
  // Without --json stdout stays empty on failure.
  auto plain = f.run({"connect", "1-18"});
  CHECK(plain.rc == kExitRefused);
  CHECK(plain.out.empty());
}

TEST_CASE("the ocsctl binary returns documented exit codes", "[cli]") {
  std::string bin = testing::bin_path("ocsctl");
  auto code = [&](const std::string& args) {
    // A password is set so a refused connection, not a missing password, decides exit 4.
    int status = std::system(("OCSLAB_OCS_PASSWORD=x " + bin + " " + args + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(code("--help") == 0);
  CHECK(code("--version") == 0);
  CHECK(code("--bogus") == 1);
  CHECK(code("-s http://x list") == 2);
  CHECK(code("-s tl1://127.0.0.1:" + std::to_string(testing::free_loopback_port()) +
             " --connect-timeout-ms 500 list") == 4);
}

TEST_CASE("the ocsctl binary sends the password only to its host, and warns when TL1 carries it in clear",
          "[cli][credentials]") {
  std::string bin = testing::bin_path("ocsctl");
  testing::TempDir dir;
  const std::string err = dir.path() + "/stderr";
  // No credentials file of this machine's user, nothing inherited: only what each run sets.
  auto run = [&](const std::string& env, const std::string& url) {
    std::string cmd = "env -u OCSLAB_OCS_PASSWORD -u OCSLAB_OCS_PASSWORD_HOST OCSLAB_OCS_CREDENTIALS=" + dir.path() +
                      "/none " + env + " " + bin + " -s " + url + " --connect-timeout-ms 300 list >/dev/null 2>" + err;
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  // TEST-NET-1: nothing answers there; what matters happens before the connection.
  CHECK(run("OCSLAB_OCS_PASSWORD=s3cret-pw", "tl1://admin@192.0.2.1:3082") == kExitInput);
  std::string text = read_file(err);
  CHECK_THAT(text, Catch::Contains("switch host '192.0.2.1'") &&
                       Catch::Contains("OCSLAB_OCS_PASSWORD_HOST=192.0.2.1") && !Catch::Contains("s3cret-pw") &&
                       !Catch::Contains("clear text"));
  CHECK(run("OCSLAB_OCS_PASSWORD=s3cret-pw OCSLAB_OCS_PASSWORD_HOST=sw1", "tl1://admin@192.0.2.1:3082") == kExitInput);
  CHECK_THAT(read_file(err), Catch::Contains("OCSLAB_OCS_PASSWORD_HOST='sw1'"));
  // Bound to it: sent (the connection fails, exit 4), after one warning.
  CHECK(run("OCSLAB_OCS_PASSWORD=s3cret-pw OCSLAB_OCS_PASSWORD_HOST=192.0.2.1", "tl1://admin@192.0.2.1:3082") ==
        kExitUnreachable);
  text = read_file(err);
  CHECK_THAT(text, Catch::Contains("tl1://admin@192.0.2.1:3082: the TL1 password travels in clear text") &&
                       !Catch::Contains("s3cret-pw"));
  // A password TL1 cannot carry: refused naming the rule, exit 2.
  CHECK(run("OCSLAB_OCS_PASSWORD='s3cret;pw'",
            "tl1://admin@127.0.0.1:" + std::to_string(testing::free_loopback_port())) == kExitInput);
  CHECK_THAT(read_file(err), Catch::Contains("cannot be sent over TL1: TL1 login fields are printable ASCII") &&
                                 !Catch::Contains("s3cret"));
}

// docs/guarantees.md, "Privileges": ocsctl needs nothing. The emulator and its client both run
// as nobody, from a copy of the binary in a folder nobody can reach (the checkout may not be:
// a clone in root's home is mode 0700).
TEST_CASE("ocsctl needs no privilege: an emulator and its client both run as nobody", "[cli]") {
  testing::TempDir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
  const std::string copy = dir.path() + "/ocsctl";
  std::filesystem::copy_file(testing::bin_path("ocsctl"), copy);
  REQUIRE(::chmod(copy.c_str(), 0755) == 0);
  const std::vector<std::string> as_nobody = {"setpriv",
                                              "--reuid=65534",
                                              "--regid=65534",
                                              "--clear-groups",
                                              "env",
                                              "HOME=" + dir.path(),
                                              "OCSLAB_OCS_PASSWORD=root",
                                              "OCSLAB_OCS_CREDENTIALS=" + dir.path() + "/none",
                                              "timeout",
                                              "30",
                                              copy};
  const std::string port = std::to_string(testing::free_loopback_port());
  const std::string ready = dir.path() + "/ready.json";
  auto emulate = as_nobody;
  emulate.insert(emulate.end(), {"emulate", "--size", "8x8", "--switching-ms", "5", "--listen", "127.0.0.1:" + port,
                                 "--ready-file", ready});
  SpawnOptions so;
  so.log_file = dir.path() + "/emulate.log";
  pid_t emu = spawn_program(emulate, so);
  const bool up = testing::poll_until([&] { return std::filesystem::exists(ready); }, std::chrono::seconds(20),
                                      std::chrono::milliseconds(25));
  auto client = [&](const std::vector<std::string>& args) {
    auto argv = as_nobody;
    argv.insert(argv.end(), {"-s", "tl1://admin@127.0.0.1:" + port});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program_status(argv);
  };
  ProgramResult made, listed;
  struct stat st {};
  const bool stat_ok = up && ::stat(ready.c_str(), &st) == 0;
  if (up) {
    made = client({"connect", "1-9"});
    listed = client({"--csv", "list"});
  }
  ::kill(emu, SIGTERM);
  ::waitpid(emu, nullptr, 0);
  INFO(read_file_or_empty(so.log_file) << made.err << listed.err);
  REQUIRE(up);
  REQUIRE(stat_ok);
  CHECK(st.st_uid == 65534);  // the emulator really ran as nobody
  CHECK(made.status == 0);
  CHECK(listed.status == 0);
  CHECK(listed.out == "ingress,egress\n1,9\n");
}

TEST_CASE("ocsctl emulate: --dry-run prints the wiring; a running emulator serves the CLI and stops on SIGINT",
          "[cli][emulate]") {
  testing::TempDir dir;
  std::string lab = dir.path() + "/lab.yaml";
  std::ofstream(lab) << "switch: {name: sw9, size: 8x8, switching_ms: 5}\n"
                        "nics:\n  - {name: h1-eth1, tx_port: 1, rx_port: 12, tap: {name: never-made}}\n";
  std::ostringstream out, err;
  REQUIRE(run_ocsctl({"emulate", lab, "--dry-run"}, out, err) == kExitOk);
  CHECK_THAT(out.str(), Catch::Contains("switch sw9: polatis-6000 preset, 8x8") && Catch::Contains("h1-eth1") &&
                            Catch::Contains("tap never-made"));
  std::ofstream(lab) << "switch: {size: 8x8}\nnics:\n  - {name: h1, tx_port: 9, rx_port: 12, tap: {name: x}}\n";
  std::ostringstream o2, e2;
  CHECK(run_ocsctl({"emulate", lab, "--dry-run"}, o2, e2) == kExitInput);
  CHECK_THAT(e2.str(), Catch::Contains(lab + ":3:25: h1: tx_port 9 is not an ingress port"));

  std::string ready = dir.path() + "/ready.json", log = dir.path() + "/emulate.log";
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string bin = testing::bin_path("ocsctl");
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::execl(bin.c_str(), bin.c_str(), "emulate", "--size", "8x8", "--listen", "0", "--scpi", "0", "--ready-file",
            ready.c_str(), nullptr);
    ::_exit(127);
  }
  REQUIRE(testing::poll_until([&] { return ::access(ready.c_str(), R_OK) == 0; }, std::chrono::seconds(60)));
  auto ports = nlohmann::json::parse(std::ifstream(ready));
  ::setenv(kPasswordEnv, "root", 1);
  std::ostringstream o3, e3;
  int rc =
      run_ocsctl({"-s", "tl1://admin@127.0.0.1:" + std::to_string(ports["tl1"].get<int>()), "connect", "1-9"}, o3, e3);
  std::ostringstream o4, e4;
  int rc2 = run_ocsctl({"-s", "scpi://127.0.0.1:" + std::to_string(ports["scpi"].get<int>()), "--csv", "list"}, o4, e4);
  ::unsetenv(kPasswordEnv);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(rc == kExitOk);
  CHECK(rc2 == kExitOk);
  CHECK(o4.str() == "ingress,egress\n1,9\n");  // made over TL1, read back over SCPI
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::ifstream logf(log);
  std::string text((std::istreambuf_iterator<char>(logf)), {});
  CHECK_THAT(text, Catch::Contains("ocsctl emulate: stopped"));
}
