#include "ocslab/workloads/collbench_main.h"

#include <fmt/format.h>

#include <iostream>

#include "ocslab/common/error.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/workloads/shim_hooks.h"

namespace po = boost::program_options;

namespace ocslab::workloads {

namespace {

Job read_job(const po::variables_map& vm) {
  Job job;
  CommonOptions& o = job.options;
  o = common_options(vm);
  Schedule& s = job.schedule;
  s = load_schedule(o.schedule_path);
  if (o.steps >= 1) s.steps = o.steps;
  if (o.warmup >= 0) s.warmup = o.warmup;
  if (o.nranks < 0) o.nranks = s.ranks;
  if (o.nranks != s.ranks) {
    throw Error(fmt::format("{}: the schedule has {} ranks, this job {} (--nranks/--ranks/launcher)", s.origin, s.ranks,
                            o.nranks));
  }
  if (o.rank >= o.nranks) throw Error(fmt::format("--rank {} is outside 0..{}", o.rank, o.nranks - 1));
  if (o.rendezvous.empty() && o.nranks > 1) throw Error("missing --ranks or --rendezvous HOST:PORT");
  // Flag errors before anything starts; the shim joins after the rendezvous (every rank is up).
  job.phase = phase_options(vm, o.rank, o.nranks, o.host, o.timeout);
  return job;
}

}  // namespace

int collbench_main(int argc, char** argv, const CollbenchProgram& program) {
  po::options_description desc("options");
  add_common_options(desc);
  add_phase_options(desc);
  program.add_options(desc);
  desc.add_options()("help,h", "this help");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << program.name << ": " << e.what() << "\n\n" << program.usage << desc;
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << program.usage << desc << "\n" << exit_code_help();
    return kExitOk;
  }
  try {
    return program.run(vm, read_job(vm));
  } catch (const Error& e) {
    std::cerr << program.name << ": " << e.what() << "\n";
    return kExitInput;
  }
}

int run_job(const Job& job, const std::string& backend_name,
            const std::function<std::unique_ptr<Backend>(Rendezvous&)>& make_backend) {
  const CommonOptions& o = job.options;
  const Schedule& s = job.schedule;
  Rendezvous rv(o.rank, o.nranks, o.rendezvous.empty() ? "localhost:1" : o.rendezvous, rendezvous_tag(s, backend_name),
                o.timeout);
  // Without --controller the fabric is never reconfigured (no-op hooks). A refused join
  // (group size disagreement, unknown dimension) throws PhaseError naming rank and group: exit 2.
  std::unique_ptr<PhaseHooks> hooks =
      job.phase ? std::make_unique<ShimHooks>(s, o.rank, *job.phase) : std::make_unique<PhaseHooks>();
  std::unique_ptr<Backend> backend = make_backend(rv);
  std::cerr << fmt::format("rank {} on {}: {}\n", o.rank, o.host, backend->describe());
  int rc = run_and_report(s, o, backend_name, *backend, *hooks, rv);
  // The shim's own record (requests, ACK waits, provisioning, fallbacks) next to the rows.
  if (auto* sh = dynamic_cast<ShimHooks*>(hooks.get()); sh && !o.output.empty()) {
    sh->shim().write_csv(fmt::format("{}/shim-rank{}.csv", o.output, o.rank));
    if (sh->shim().provisioning_active()) {
      sh->shim().phase_table().save(fmt::format("{}/phase-table-rank{}.csv", o.output, o.rank));
    }
  }
  return rc;
}

}  // namespace ocslab::workloads
