// The ocslab-agent command line in-process: help and exit codes, and a standalone capture
// writing the tidy CSV.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
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
