// The ocslab-agent command line in-process: help and exit codes, and a standalone capture
// writing the tidy CSV.
#include <catch2/catch.hpp>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ocslab/agent/cli.h"
#include "ocslab/testing/sshd_fixture.h"

using namespace ocslab::agent;

namespace {

int run(const std::vector<std::string>& args, std::string* out = nullptr, std::string* err = nullptr) {
  std::ostringstream o, e;
  int rc = run_cli(args, o, e);
  if (out) *out = o.str();
  if (err) *err = e.str();
  return rc;
}

}  // namespace

TEST_CASE("help for every command, usage errors exit 1", "[agent][cli]") {
  std::string out, err;
  CHECK(run({"--help"}, &out) == kExitOk);
  CHECK(out.find("serve") != std::string::npos);
  CHECK(out.find("Exit codes") != std::string::npos);
  for (const char* cmd : {"serve", "capture", "probes"}) {
    CHECK(run({cmd, "--help"}, &out) == kExitOk);
    CHECK(out.find(std::string("Usage: ocslab-agent ") + cmd) == 0);
  }
  CHECK(run({}, &out, &err) == kExitUsage);
  CHECK(run({"frobnicate"}, &out, &err) == kExitUsage);
  CHECK(err.find("unknown command 'frobnicate'") != std::string::npos);
  CHECK(run({"serve"}, &out, &err) == kExitUsage);
  CHECK(err.find("give --stdio or --socket PATH") != std::string::npos);
  CHECK(run({"capture", "--duration", "1"}, &out, &err) == kExitUsage);
  CHECK(run({"probes"}, &out) == kExitOk);
  // One line per probe, its name first, then whether it can run here: the heartbeat always can.
  std::vector<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    names.push_back(line.substr(0, line.find(' ')));
    CHECK((line.find(" can run here") != std::string::npos || line.find(" cannot run here: ") != std::string::npos));
  }
  CHECK(names == std::vector<std::string>{"carrier", "firmware", "gid", "heartbeat", "rdma", "rx_power"});
  CHECK(out.find("heartbeat  can run here") != std::string::npos);
  // On loopback: no transceiver to read, and the reason says so, naming the interface.
  CHECK(run({"probes", "--if", "lo"}, &out) == kExitOk);
  const size_t rx = out.find("rx_power   cannot run here: ");
  CHECK(rx != std::string::npos);
  CHECK(out.find("lo", rx) != std::string::npos);
  CHECK(run({"probes", "--if", "nosuchif0"}, &out, &err) == kExitInput);
  CHECK(err.find("--if nosuchif0: no such interface on this host") != std::string::npos);
}

TEST_CASE("an option of another command is refused, not ignored", "[agent][cli]") {
  std::string out, err;
  // Each of these would otherwise run (a capture, the probe list) with the option dropped.
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--socket", "/tmp/x.sock"}, &out, &err) ==
        kExitUsage);
  CHECK(err.find("option --socket does not apply to 'capture'") != std::string::npos);
  CHECK(out.empty());
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--spool-dir", "/tmp"}, &out, &err) ==
        kExitUsage);
  CHECK(err.find("option --spool-dir does not apply to 'capture'") != std::string::npos);
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--stdio"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --stdio does not apply to 'capture'") != std::string::npos);
  CHECK(run({"probes", "--interval-ms", "50"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --interval-ms does not apply to 'probes'") != std::string::npos);
  CHECK(out.empty());
  CHECK(run({"probes", "--socket", "/tmp/x.sock"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --socket does not apply to 'probes'") != std::string::npos);
  // serve: named before anything else about serve is checked or started.
  CHECK(run({"serve", "--duration", "5"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --duration does not apply to 'serve'") != std::string::npos);
  CHECK(run({"serve", "--socket", "/tmp/x.sock", "--no-daemon", "--probes", "heartbeat"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --probes does not apply to 'serve'") != std::string::npos);
  CHECK(run({"serve", "--socket", "/tmp/x.sock", "--no-daemon", "-o", "t.csv"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --output does not apply to 'serve'") != std::string::npos);
  // The command's own options and the global ones still pass.
  CHECK(run({"probes", "--log-level", "error", "--host", "h1"}, &out, &err) == kExitOk);
  CHECK(out.find("heartbeat  can run here") != std::string::npos);
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--interval-ms", "100"}, &out, &err) == kExitOk);
  CHECK(run({"probes", "--carrier-poll-ms", "5"}, &out, &err) == kExitUsage);
  CHECK(err.find("option --carrier-poll-ms does not apply to 'probes'") != std::string::npos);
}

TEST_CASE("capture --carrier-poll-ms takes 0 (off) or 1..1000 ms", "[agent][cli]") {
  std::string out, err;
  for (const char* bad : {"1001", "60000"}) {
    INFO(bad);
    CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--carrier-poll-ms", bad}, &out, &err) != 0);
    CHECK(err.find("--carrier-poll-ms must be 0 (off) or 1..1000, got " + std::string(bad)) != std::string::npos);
  }
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--carrier-poll-ms", "0"}, &out, &err) ==
        kExitOk);
}

TEST_CASE("forwarding --help lists every exit code the forwarding commands return", "[agent][cli]") {
  std::string help, out, err;
  REQUIRE(run({"forwarding", "--help"}, &help) == 0);
  // The list: "  N  text" lines, continued by deeper-indented ones, up to a blank line.
  std::map<int, std::string> listed;
  std::istringstream in(help.substr(help.find("\nExit codes:\n") + 13));
  int last = -1;
  for (std::string line; std::getline(in, line) && !line.empty();) {
    if (line.size() > 3 && line.compare(0, 2, "  ") == 0 && std::isdigit(static_cast<unsigned char>(line[2])))
      last = line[2] - '0';
    REQUIRE(last >= 0);
    listed[last] += line + "\n";
  }
  std::vector<int> codes;
  for (const auto& [code, text] : listed) codes.push_back(code);
  CHECK(codes == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});  // common/exit_code.h's table

  // What the commands return here, each listed with its cause.
  CHECK(run({"forwarding"}, &out, &err) == 1);
  CHECK(run({"forwarding", "plan", "--fabric", "/nonexistent/clifix.yaml", "--host", "h1"}, &out, &err) == 2);
  CHECK_THAT(listed[2], Catch::Contains("fabric file"));
  // lo has no RDMA device: the probe cannot run.
  ocslab::testing::TempDir dir;
  const std::string secret_file = dir.path() + "/secret";
  std::ofstream(secret_file) << std::string(64, 'a') << "\n";
  CHECK(run({"forwarding", "ping", "--if", "lo", "--connect", "127.0.0.1:1", "--secret-file", secret_file,
             "--timeout-s", "1"},
            &out, &err) == ocslab::kExitRefused);  // 3: refused before anything changed (was 5 before the common table)
  CHECK_THAT(listed[3], Catch::Contains("ping: the RDMA probe cannot run"));
  CHECK_THAT(listed[4], Catch::Contains("ping: fewer than --count good completions within --timeout-s"));
  // fabric --from-switch with no switch listening.
  std::ofstream(dir.path() + "/w.yaml") << "hosts:\n"
                                           "  - name: h1\n"
                                           "    ports:\n"
                                           "      - name: p0\n"
                                           "        if1: {name: eth1, ip: 10.0.0.10/24, mac: \"02:00:00:00:01:00\"}\n"
                                           "        if2: {name: eth1v, mac: \"02:00:00:00:01:10\"}\n"
                                           "cables:\n"
                                           "  - {host: h1, port: p0, tx: 1, rx: 17}\n";
  ::setenv("OCSLAB_OCS_PASSWORD", "root", 1);
  int rc = run({"forwarding", "fabric", "--wiring", dir.path() + "/w.yaml", "--from-switch",
                "tl1://admin@127.0.0.1:" + std::to_string(ocslab::testing::free_loopback_port())},
               &out, &err);
  ::unsetenv("OCSLAB_OCS_PASSWORD");
  INFO(err);
  CHECK(rc == 4);
  CHECK_THAT(listed[4], Catch::Contains("fabric: the switch") && Catch::Contains("cannot be reached"));
}

TEST_CASE("forwarding ping: a secret is required, every address only when asked", "[agent][cli]") {
  ocslab::testing::TempDir dir;
  std::string out, err;
  const std::string good = dir.path() + "/good", short_one = dir.path() + "/short";
  std::ofstream(good) << std::string(64, 'b') << "\n";
  std::ofstream(short_one) << "b0b0b0\n";
  // No --secret-file: a usage error.
  CHECK(run({"forwarding", "ping", "--if", "lo", "--listen", "127.0.0.1:0"}, &out, &err) == 1);
  CHECK_THAT(err, Catch::Contains("--secret-file FILE"));
  // A secret too short to authenticate anything: bad input, and the message does not quote it.
  CHECK(run({"forwarding", "ping", "--if", "lo", "--listen", "127.0.0.1:0", "--secret-file", short_one}, &out, &err) ==
        2);
  CHECK_THAT(err, Catch::Contains("32 to 256 hex digits"));
  CHECK(err.find("b0b0b0") == std::string::npos);
  CHECK(run({"forwarding", "ping", "--if", "lo", "--listen", "127.0.0.1:0", "--secret-file", dir.path() + "/none"},
            &out, &err) == 2);
  // Every address: refused without --any-address, before the probe starts.
  for (const char* wildcard : {"0.0.0.0:18520", ":18520", "[::]:18520"}) {
    CHECK(run({"forwarding", "ping", "--if", "lo", "--listen", wildcard, "--secret-file", good}, &out, &err) == 1);
    CHECK_THAT(err, Catch::Contains("every address of this host") && Catch::Contains("--any-address"));
  }
  // With it, the wildcard gets as far as the probe (lo has no RDMA device: 3).
  CHECK(run({"forwarding", "ping", "--if", "lo", "--listen", "0.0.0.0:18520", "--any-address", "--secret-file", good},
            &out, &err) == 3);
}

TEST_CASE("capture writes the tidy CSV; an unknown probe is bad input", "[agent][cli]") {
  ocslab::testing::TempDir dir;
  std::string path = dir.path() + "/t.csv", err;
  REQUIRE(
      run({"capture", "--probes", "heartbeat", "--interval-ms", "20", "--duration", "0.3", "--host", "h9", "-o", path},
          nullptr, &err) == kExitOk);
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  CHECK(header == "t_ns,host,source,subject,signal,value,unit");
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    ++rows;
    CHECK(line.find(",h9,heartbeat,agent,heartbeat," + std::to_string(rows) + ",count") != std::string::npos);
  }
  CHECK(rows >= 5);
  CHECK(err.find("samples written to " + path) != std::string::npos);

  CHECK(run({"capture", "--probes", "heartbeat,warp_drive", "--duration", "0.1"}, nullptr, &err) == kExitInput);
  CHECK(err.find("unknown probe 'warp_drive' (known: carrier, firmware, gid, heartbeat, rdma, rx_power)") !=
        std::string::npos);
  CHECK(run({"capture", "--probes", "heartbeat", "--interval-ms", "0"}, nullptr, &err) == kExitInput);
}

TEST_CASE("capture --format jsonl writes one JSON object per sample and line", "[agent][cli]") {
  std::string out, err;
  REQUIRE(run({"capture", "--probes", "heartbeat", "--interval-ms", "20", "--duration", "0.3", "--host", "h9",
               "--format", "jsonl"},
              &out, &err) == kExitOk);
  std::istringstream in(out);
  int rows = 0;
  int64_t last_t = 0;
  for (std::string line; std::getline(in, line);) {
    ++rows;
    auto j = nlohmann::json::parse(line);  // throws on a header or anything but one object per line
    CHECK(j.size() == 7);
    CHECK(j["host"] == "h9");
    CHECK(j["source"] == "heartbeat");
    CHECK(j["signal"] == "heartbeat");
    CHECK(j["value"].get<double>() == rows);  // a number, not the CSV's text
    CHECK(j["unit"] == "count");
    CHECK(j["t_ns"].get<int64_t>() > last_t);
    last_t = j["t_ns"].get<int64_t>();
  }
  CHECK(rows >= 5);
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--format", "jsnol"}, &out, &err) == kExitInput);
  CHECK(err.find("unknown format 'jsnol'. Did you mean 'jsonl'?") != std::string::npos);
  CHECK(out.empty());
}

TEST_CASE("an unknown command, subcommand or option names the nearest valid one", "[agent][cli]") {
  std::string out, err;
  CHECK(run({"captuer", "--probes", "heartbeat"}, &out, &err) == kExitUsage);
  CHECK(err.find("ocslab-agent: unknown command 'captuer'. Did you mean 'capture'?") != std::string::npos);
  CHECK(run({"capture", "--probes", "heartbeat", "--duraton", "1"}, &out, &err) == kExitUsage);
  CHECK(err.find("unknown option '--duraton'. Did you mean '--duration'?") != std::string::npos);
  CHECK(run({"forwarding", "verfy", "--fabric", "x.yaml"}, &out, &err) == kExitUsage);
  CHECK(err.find("unknown subcommand 'verfy'. Did you mean 'verify'?") != std::string::npos);
  CHECK(run({"forwarding", "verify", "--fabrc", "x.yaml"}, &out, &err) == kExitUsage);
  CHECK(err.find("unknown option '--fabrc'. Did you mean '--fabric'?") != std::string::npos);
  CHECK(run({"zzzzzz"}, &out, &err) == kExitUsage);
  CHECK(err.find("unknown command 'zzzzzz'.\n") != std::string::npos);
}

TEST_CASE("forwarding --json: a failure is one JSON object on stdout, the message on stderr", "[agent][cli]") {
  std::string out, err;
  // A bad file, an unknown option, a bad operation id, a bad subcommand: each a valid document.
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{"forwarding", "plan", "--json", "--fabric", "/nonexistent/clifix.yaml", "--host", "h1"}, kExitInput},
      {{"forwarding", "apply", "--json", "--fabrc", "x.yaml"}, kExitUsage},
      {{"forwarding", "rollback", "--json", "--op-id", "a b"}, kExitUsage},
      {{"forwarding", "verfy", "--json"}, kExitUsage}};
  for (const auto& [args, code] : cases) {
    INFO(args[1] << " " << args.back());
    CHECK(run(args, &out, &err) == code);
    auto j = nlohmann::json::parse(out);  // throws (fails the case) on anything but JSON
    CHECK(j["exit_code"] == code);
    CHECK_FALSE(j["error"].get<std::string>().empty());
    CHECK(err.find(j["error"].get<std::string>()) != std::string::npos);
    CHECK(j["error"].get<std::string>().find("Try '") == std::string::npos);
  }
  CHECK(nlohmann::json::parse(out)["error"].get<std::string>().find("Did you mean 'verify'?") != std::string::npos);
  // Without --json stdout stays empty on a failure.
  CHECK(run({"forwarding", "verfy"}, &out, &err) == kExitUsage);
  CHECK(out.empty());
}

TEST_CASE("capture to a full disk fails naming the file instead of reporting samples written", "[agent][cli]") {
  // /dev/full answers every write with ENOSPC; the rows of a short capture sit in the stream's
  // buffer until the final flush, which must fail the command.
  std::string err;
  CHECK(run({"capture", "--probes", "heartbeat", "--interval-ms", "20", "--duration", "0.2", "-o", "/dev/full"},
            nullptr, &err) == kExitInput);
  CHECK_THAT(err, Catch::Contains("ocslab-agent capture: cannot write CSV output '/dev/full'"));
  CHECK_THAT(err, !Catch::Contains("samples written"));
  // A capture long enough to spill the buffer mid-run stops at the first failed row.
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run({"capture", "--probes", "heartbeat", "--interval-ms", "1", "--duration", "30", "-o", "/dev/full"}, nullptr,
            &err) == kExitInput);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  CHECK_THAT(err, Catch::Contains("'/dev/full'") && Catch::Contains(std::strerror(ENOSPC)));
}

TEST_CASE("serve --help explains the spool limits; a bad one is refused naming the flag and value", "[agent][cli]") {
  std::string out, err;
  CHECK(run({"serve", "--help"}, &out) == kExitOk);
  CHECK_THAT(out, Catch::Contains("--spool-max-age") && Catch::Contains("N[s|m|h|d]") &&
                      Catch::Contains("--spool-max-bytes") && Catch::Contains("deleting the oldest first"));
  CHECK_THAT(out, Catch::Contains("(=7d)") && Catch::Contains("(=4G)"));  // the defaults, as boost prints them
  CHECK(run({"serve", "--stdio", "--no-daemon", "--spool-max-age", "7x"}, &out, &err) == kExitInput);
  CHECK_THAT(err, Catch::Contains("--spool-max-age '7x' is not a number with an optional unit (smhd)"));
  CHECK(run({"serve", "--stdio", "--no-daemon", "--spool-max-bytes", "0"}, &out, &err) == kExitInput);
  CHECK_THAT(err, Catch::Contains("--spool-max-bytes '0' must be more than 0"));
  CHECK(run({"probes", "--spool-max-age", "1d"}, &out, &err) == kExitUsage);
  CHECK_THAT(err, Catch::Contains("option --spool-max-age does not apply to 'probes'"));
}
