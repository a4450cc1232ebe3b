#include "ocslab/workloads/collbench_main.h"

#include <fmt/format.h>

#include <iostream>

#include "ocslab/common/error.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/common/suggest.h"
#include "ocslab/common/version.h"
#include "ocslab/workloads/shim_hooks.h"

namespace po = boost::program_options;

namespace ocslab::workloads {

namespace {

void check_world(const CommonOptions& o) {
  if (o.rank >= o.nranks) throw Error(fmt::format("--rank {} is outside 0..{}", o.rank, o.nranks - 1));
  if (o.rendezvous.empty() && o.nranks > 1) throw MissingOption("missing --ranks or --rendezvous HOST:PORT");
}

void read_sweep_job(const po::variables_map& vm, Job& job) {
  CommonOptions& o = job.options;
  for (const char* name : {"controller", "output", "steps", "warmup", "no-verify"}) {
    if (vm.count(name)) {
      throw Error(
          fmt::format("--{} applies to a schedule (--schedule FILE); the size sweep takes nccl-tests' "
                      "options (-n iterations, -w warm-up, -c check, -J JSON file)",
                      name));
    }
  }
  job.sweep = sweep_options(vm);
  if (o.nranks < 0) o.nranks = 1;
  if (o.rank < 0) {
    if (o.nranks > 1) throw MissingOption("missing --rank (and no launcher environment names it)");
    o.rank = 0;
  }
  check_world(o);
  job.schedule = sweep_schedule(*job.sweep, o.nranks);
}

void read_schedule_job(const po::variables_map& vm, Job& job) {
  CommonOptions& o = job.options;
  if (auto given = sweep_options_given(vm); !given.empty()) {
    throw Error(fmt::format("{} belongs to the size sweep, which runs without --schedule", given.front()));
  }
  if (o.rank < 0) throw MissingOption("missing --rank (and no launcher environment names it)");
  Schedule& s = job.schedule;
  s = load_schedule(o.schedule_path);
  if (o.steps >= 1) s.steps = o.steps;
  if (o.warmup >= 0) s.warmup = o.warmup;
  if (o.nranks < 0) o.nranks = s.ranks;
  if (o.nranks != s.ranks) {
    throw Error(fmt::format("{}: the schedule has {} ranks, this job {} (--nranks/--ranks/launcher)", s.origin, s.ranks,
                            o.nranks));
  }
  check_world(o);
  // Flag errors before anything starts; the shim joins after the rendezvous (every rank is up).
  job.phase = phase_options(vm, o.rank, o.nranks, o.host, o.timeout);
}

}  // namespace

Job read_job(const po::variables_map& vm) {
  Job job;
  job.options = common_options(vm);
  if (job.options.schedule_path.empty()) {
    read_sweep_job(vm, job);
  } else {
    read_schedule_job(vm, job);
  }
  return job;
}

int collbench_main(int argc, char** argv, const CollbenchProgram& program) {
  po::options_description desc("options");
  add_common_options(desc);
  add_phase_options(desc);
  add_sweep_options(desc);
  program.add_options(desc);
  desc.add_options()("help,h", "this help")("version,V", "print the version");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("version")) {
      std::cout << program.name << " " << project_version() << "\n";
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::string message = e.what();
    if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) {
      std::vector<std::string> names;
      for (const auto& o : desc.options()) names.push_back("--" + o->long_name());
      message = unknown_word_message("option", u->get_option_name(), names);
    }
    // One line and where the help is, not the help itself (it is a screenful). A value boost
    // cannot convert (`--rank x`) is bad input like `-n 0`.
    std::cerr << program.name << ": " << message << "\nTry '" << program.name << " --help'.\n";
    return dynamic_cast<const po::validation_error*>(&e) ? kExitInput : kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << program.usage << desc << "\n" << exit_code_help();
    return kExitOk;
  }
  try {
    Job job = read_job(vm);
    job.program = program.name;
    job.args.assign(argv, argv + argc);
    return program.run(vm, job);
  } catch (const MissingOption& e) {
    std::cerr << program.name << ": " << e.what() << "\nTry '" << program.name << " --help'.\n";
    return kExitUsage;
  } catch (const CannotRunHere& e) {
    std::cerr << program.name << ": " << e.what() << "\n";
    return kExitRefused;
  } catch (const RendezvousPeerError& e) {
    std::cerr << program.name << ": " << e.what() << "\n";
    return kExitUnreachable;
  } catch (const Error& e) {
    std::cerr << program.name << ": " << e.what() << "\n";
    return kExitInput;
  }
}

int run_job(const Job& job, const std::string& backend_name,
            const std::function<std::unique_ptr<Backend>(Rendezvous&)>& make_backend) {
  const CommonOptions& o = job.options;
  const Schedule& s = job.schedule;
  if (o.rank == 0 && o.nranks > 1 && o.rendezvous_token.empty()) {
    std::cerr << fmt::format("rank 0: the rendezvous on {} takes any connection (no --rendezvous-token-file)\n",
                             o.rendezvous);
  }
  RendezvousOptions ro;
  ro.token = o.rendezvous_token;
  ro.listen = o.rendezvous_listen;
  Rendezvous rv(o.rank, o.nranks, o.rendezvous.empty() ? "localhost:1" : o.rendezvous, rendezvous_tag(s, backend_name),
                o.timeout, ro);
  for (const auto& d : rv.notes()) std::cerr << "rank 0: rendezvous: " << d << "\n";
  if (job.sweep) {  // nccl-tests' size sweep: no phase hooks (read_job refused --controller)
    std::unique_ptr<Backend> backend = make_backend(rv);
    std::cerr << fmt::format("rank {} on {}: {}\n", o.rank, o.host, backend->describe());
    return run_sweep_and_report(s, o, *job.sweep, job.program, backend_name, *backend, rv, job.args);
  }
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
