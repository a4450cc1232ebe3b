// `ocslab run --check` of a `framework: torch` phase-workload spec, run in-process: every
// rank's launch command (PyTorch's environment, the token file's path, never a token) and the
// process groups the layout implies, printed without touching a host.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "cli_run.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"

namespace run_check_torch_test {

using Catch::Matchers::Contains;
using vlab_unit::run_cli;

TEST_CASE("run --check of a torch job prints each rank's command and the layout's groups", "[cli][torch]") {
  ocslab::testing::TempDir dir;
  const std::string script = ocslab::testing::source_dir() + "/experiments/torch/examples/train_lm.py";
  const std::string spec = dir.path() + "/lm.yaml";
  // Nothing listens on these ports: --check must not connect to the hosts or the switch.
  std::ofstream(spec) << "type: phase-workload\nname: lm\nlab:\n  inventory:\n"
                         "    - {name: h1, ssh: 'root@127.0.0.1:1', nics: [{name: lo, tx_port: 1, rx_port: 9}, "
                         "{name: lo2, tx_port: 3, rx_port: 11}]}\n"
                         "    - {name: h2, ssh: 'root@127.0.0.1:1', nics: [{name: lo, tx_port: 2, rx_port: 10}, "
                         "{name: lo2, tx_port: 4, rx_port: 12}]}\n"
                         "switch: {url: 'tl1://admin@127.0.0.1:1'}\n"
                         "workload:\n  framework: torch\n  script: "
                      << script
                      << "\n  args: [--steps, '2']\n  modes: [native, on-demand]\n"
                         "  placement: [h1:lo, h1:lo2, h2:lo, h2:lo2]\n  port: 29500\n"
                         "  native_group_if: {pp: lo}\n"
                         "phase: {job: lm, pp: 2, dims: [{name: dp, size: 2}], initial: '11'}\n";
  // --check looks up the switch's password, as the run would: present, for the switch on loopback.
  vlab_unit::EnvVar password("OCSLAB_OCS_PASSWORD", "never-sent"), bound("OCSLAB_OCS_PASSWORD_HOST", nullptr);
  auto r = run_cli({"run", spec, "--check"});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("phase-workload, 4 rank(s) of torch (" + script + "), modes: native on-demand"));
  CHECK_THAT(r.out, Contains("process groups the layout implies:\n  pp: [0 2] [1 3]\n  dp: [0 1] [2 3]\n"));
  const std::string tail = "/usr/bin/python3 -m ocslab.torch_backend " + script + " --backend ocslab --steps 2\n";
  // native: no controller, no token; rank 1 is h1's second rank.
  CHECK_THAT(r.out, Contains("native (ssh):\n  h1$ env RANK=0 LOCAL_RANK=0 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 "
                             "MASTER_PORT=29500 OCSLAB_LAYOUT=pp=2,dp=2 OCSLAB_RANK_IFS=lo,lo2,lo,lo2 "
                             "OCSLAB_GROUP_IF=pp=lo 'OCSLAB_SHIM_CSV=<tmp>/shim-rank0.csv' "));
  CHECK_THAT(r.out, Contains("  h1$ env RANK=1 LOCAL_RANK=1 WORLD_SIZE=4 "));
  CHECK_THAT(r.out, Contains("on-demand (ssh):\n"));
  CHECK_THAT(r.out, Contains("  h2$ env RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "
                             "'OCSLAB_CONTROLLER=127.0.0.1:<port>' OCSLAB_JOB=lm "
                             "'OCSLAB_CONTROLLER_TOKEN_FILE=<tmp>/controller.token' OCSLAB_LAYOUT=pp=2,dp=2 "
                             "OCSLAB_RANK_IFS=lo,lo2,lo,lo2 'OCSLAB_SHIM_CSV=<tmp>/shim-rank3.csv' "));
  CHECK_THAT(r.out, Contains(tail));
}

}  // namespace run_check_torch_test
