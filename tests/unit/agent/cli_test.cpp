// The ocslab-agent command line in-process: help and exit codes, and a standalone capture
// writing the tidy CSV.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

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
  CHECK(out == "carrier\nfirmware\nheartbeat\nrdma\nrx_power\n");
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
  CHECK(out.find("heartbeat\n") != std::string::npos);
  CHECK(run({"capture", "--probes", "heartbeat", "--duration", "0.1", "--interval-ms", "100"}, &out, &err) == kExitOk);
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
  CHECK(err.find("unknown probe 'warp_drive' (known: carrier, firmware, heartbeat, rdma, rx_power)") != std::string::npos);
  CHECK(run({"capture", "--probes", "heartbeat", "--interval-ms", "0"}, nullptr, &err) == kExitInput);
}
