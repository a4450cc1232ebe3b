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
// a new tag gets its ctest entry there (add_test(... COMMAND vlab_e2e "[mine]")).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "ocslab/common/process.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/vlab/lab_state.h"

namespace vlab_test {

using namespace ocslab;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A file of the source tree: $OCSLAB_SOURCE_DIR/rel (ctest sets it), else ./rel.
std::string source_path(const std::string& rel);

// A test tool built into build/tests (vlab_forwarding_tc, vlab_rdma_probe): under
// $OCSLAB_TEST_BIN_DIR, else next to the bin/ folder the `ocslab` binary is in.
std::string test_tool_path(const std::string& name);

// Runs build/bin/ocslab with args (no shell) to completion; a non-zero exit is returned, not thrown.
ProgramResult ocslab_cli(const std::vector<std::string>& args);

// The whole file; empty when it cannot be read.
std::string read_file(const std::string& path);

class Lab {
 public:
  // `ocslab vlab up lab_file --timeout 400` (after `vlab down` of a lab of the same name left
  // behind), printing its output and how long it took; REQUIREs that it came up (exit 0,
  // "host(s) ready in" printed, the lab listed).
  // command_timeout: how long exec/run wait for a guest command unless told otherwise.
  explicit Lab(const std::string& lab_file, std::chrono::milliseconds command_timeout = 180s);
  ~Lab();  // `vlab down`, unless down() did it
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  const vlab::LabState& state() const { return state_; }
  // `vlab down` now; CHECKs that it succeeded.
  void down();

  // Root on a guest over the lab's SSH forward (for SshSessions a test keeps open itself).
  ocs::SshOptions ssh(const std::string& host) const;
  // Runs cmd on host in a new SSH session. timeout 0: the lab's command_timeout.
  ocs::ExecResult exec(const std::string& host, const std::string& cmd,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds::zero()) const;
  // As exec, but REQUIREs exit status 0 (the message shows "host$ cmd" and its output); returns stdout.
  std::string run(const std::string& host, const std::string& cmd,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds::zero()) const;

 private:
  std::string name_;
  vlab::LabState state_;
  std::chrono::milliseconds command_timeout_;
  bool up_ = false;
};

}  // namespace vlab_test
