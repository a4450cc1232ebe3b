// The fixture the virtual-lab end-to-end tests (tests/vlab/*_test.cpp, one vlab_e2e binary)
// share: a lab that is up for one test's lifetime, commands in its guests over SSH, the
// `ocslab` CLI, and paths into the source and build trees. How to use it in a new test:
//
//   #include "lab_fixture.h"
//   using namespace vlab_test;
//
//   TEST_CASE("...", "[vlab][mine]") {
//     Lab lab("tests/vlab/labs/mine.yaml");           // `vlab up` now, `vlab down` however the test ends
//     std::string out = lab.run("h1", "ip -j link");  // REQUIREs exit 0; returns stdout
//     ocs::ExecResult r = lab.exec("h1", "false");    // any exit: r.exit_status, r.out, r.err
//     std::string dir = lab.state().dir;              // seen by the guests (their /tmp is their own)
//     fs::copy_file(test_tool_path("my_tool"), dir + "/my_tool");  // a tool built into build/tests
//   }
//
// Give the lab in the YAML a name no other test uses: a leftover lab of that name (from an
// aborted run) is taken down first. Guest commands wait 180 s unless the Lab or the call says
// otherwise. A test tool must be in tests/CMakeLists.txt's add_dependencies(vlab_e2e ...), and
// a new tag gets its ctest entry there (OCSLAB_VLAB_CASES).
//
// Sharing a booted lab (docs/testing.md "Shared labs"): a case that needs no lab of its own
// (it does not test booting, teardown, Ctrl-C or a dying VM) takes one of the shared labs,
//
//   Lab lab(kSharedFour, 60s, Sharing::kShared);
//
// which boots it when none of that name is up and otherwise hands over the running one reset to
// its state just after boot: the lab file's circuits on the switch, every guest's processes,
// links, addresses, routes, rules, permanent neighbours, qdiscs, namespaces, Soft-RoCE links,
// net sysctls and files under /tmp, /run, /var/lib and /var/spool as they were in the baseline
// taken after boot (so whatever a case started or configured, ocslab-agent probes, spools and
// forwarding state included, is gone), checked against that baseline before the case starts. A
// lab that does not come back clean is rebooted, so a failed case never hands its mess on. The
// shared lab stays up after the case (ctest's vlab_lab_<name>_down entry takes it down at the end).
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/ocsctl/types.h"
#include "ocslab/vlab/lab_state.h"
#include "ocslab/vlab/lab_timing.h"

namespace vlab_test {

using namespace ocslab;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A results folder removed when the case ends, passed or not.
struct RemovedAtEnd {
  std::string dir;
  ~RemovedAtEnd() { std::filesystem::remove_all(dir); }
};

// A file of the source tree: $OCSLAB_SOURCE_DIR/rel (ctest sets it), else ./rel.
std::string source_path(const std::string& rel);

// A CSV file the runner wrote (breakdown.csv, sweep.csv, ...), one map per row from its header's
// column names to the row's fields; REQUIREs the file and every row's field count.
std::vector<std::map<std::string, std::string>> read_csv_rows(const std::string& path);

// A test tool built into build/tests (vlab_forwarding_tc, vlab_rdma_probe): under
// $OCSLAB_TEST_BIN_DIR, else next to the bin/ folder the `ocslab` binary is in.
std::string test_tool_path(const std::string& name);

// Runs build/bin/ocslab with args (no shell) to completion; a non-zero exit is returned, not thrown.
ProgramResult ocslab_cli(const std::vector<std::string>& args);

// The labs several cases share (the ctest fixtures of tests/CMakeLists.txt's OCSLAB_VLAB_SHARED).
inline constexpr const char* kSharedFour = "tests/vlab/labs/four-hosts-fw1500.yaml";  // 4 x 1 NIC, 25 ms, fw 1.5 s
inline constexpr const char* kSharedRing = "tests/vlab/labs/fwdrun-ring.yaml";        // ring4: 4 x 2 NICs
inline constexpr const char* kSharedPhase = "experiments/labs/phase-four.yaml";       // 4 x 2 NICs, h3 a standby, liquid crystal

enum class Sharing {
  kOwn,     // booted for this case and taken down when it ends
  kShared,  // the running lab of that file, reset and checked (booted when none is up); left up
};

// Every process whose command line names the lab's folder (QEMU, the supervisor), "pid: cmd".
std::vector<std::string> processes_of(const std::string& lab_dir);

// No process of the lab's folder (QEMU, the supervisor) left and the folder gone: what `vlab
// down` must leave.
void require_nothing_left(const std::string& lab_dir);

class Lab {
 public:
  // kOwn: `ocslab vlab up lab_file --timeout 400` (after `vlab down` of a lab of the same name
  // left behind), printing its output and how long it took; REQUIREs that it came up (exit 0,
  // "host(s) ready in" printed, the lab listed).
  // kShared: as above when no healthy lab of that name and file is up; otherwise the running
  // one, reset to its baseline and REQUIREd clean (rebooted once when it is not).
  // command_timeout: how long exec/run wait for a guest command unless told otherwise.
  explicit Lab(const std::string& lab_file, std::chrono::milliseconds command_timeout = 180s,
               Sharing sharing = Sharing::kOwn);
  ~Lab();  // kOwn: `vlab down`, unless down() did it; kShared: nothing (the lab stays up)
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  const vlab::LabState& state() const { return state_; }
  bool shared() const { return sharing_ == Sharing::kShared; }
  // `vlab down` now; CHECKs that it succeeded. A shared lab is taken down for every case after
  // this one too (the next one boots it again).
  void down();

  // A guest's state as the reset compares it (sorted lines: links, addresses, routes, rules,
  // permanent neighbours, qdiscs, namespaces, Soft-RoCE links, sysctls, processes, files), and
  // the baseline taken right after the shared lab booted (empty for a lab of its own).
  std::string snapshot(const std::string& host) const;
  std::string baseline(const std::string& host) const;
  // Changes the running lab's switching time and NIC link model for this case (`ocslab vlab
  // timing`, no reboot) and REQUIREs that the lab took it. The next case's reset puts the lab
  // file's own timing back (a shared lab is then the lab file's again, whatever this case did).
  vlab::TimingState retime(const vlab::LabTiming& t) const;
  // A driver for the lab's emulated switch (TL1, the lab's password).
  std::unique_ptr<ocs::OcsDriver> switch_driver() const;
  // The lab file's circuits, as the switch had them after boot.
  const std::vector<ocs::Circuit>& initial_circuits() const { return initial_circuits_; }

  // The emulated switch's acknowledgements of `command` (TL1 ENT-PATCH: a connect) since
  // since_ns (wall clock), from the lab's ground-truth record: the switch's own count.
  int switch_acks_since(int64_t since_ns, const std::string& command = "ENT-PATCH") const;

  // Root on a guest over the lab's SSH forward (for SshSessions a test keeps open itself).
  ocs::SshOptions ssh(const std::string& host) const;
  // Runs cmd on host in a new SSH session. timeout 0: the lab's command_timeout.
  ocs::ExecResult exec(const std::string& host, const std::string& cmd,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds::zero()) const;
  // As exec, but REQUIREs exit status 0 (the message shows "host$ cmd" and its output); returns stdout.
  std::string run(const std::string& host, const std::string& cmd,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds::zero()) const;

 private:
  void boot(const std::string& lab_file);
  void take_baseline();
  // True (and the marker gone) for the first shared-lab case within two minutes of the
  // baseline taken at boot: nothing can have changed the guests since.
  bool first_since_boot();
  std::string fresh_marker() const;
  // Reset to the baseline; returns what still differs after waiting for it (empty: clean).
  std::string reset();
  bool healthy_running(const std::string& lab_file);
  void refresh_if_rebuilt();

  std::string name_;
  vlab::LabState state_;
  std::chrono::milliseconds command_timeout_;
  Sharing sharing_;
  std::vector<ocs::Circuit> initial_circuits_;
  vlab::TimingState file_timing_;  // the lab file's switch and NIC timing, as a booted lab has it
  bool up_ = false;
};

// The verify matrix's entry for src -> dst (`ocslab forwarding verify --json`, meta.json's
// forwarding matrices); fails the test when the matrix has no such pair.
inline const nlohmann::json& matrix_pair(const nlohmann::json& m, const std::string& src, const std::string& dst) {
  for (const auto& p : m["pairs"])
    if (p["src"] == src && p["dst"] == dst) return p;
  FAIL("no pair " << src << " -> " << dst);
  throw;
}

}  // namespace vlab_test
