#include "ocslab/runner/runner.h"

#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/target.h"

namespace ocslab::runner {

namespace {

TargetOptions target_options(const RunOptions& opt, const RunContext& ctx) {
  TargetOptions t;
  t.cache_dir = opt.cache_dir;
  t.self_exe = opt.self_exe;
  t.agent_binary = opt.agent_binary;
  t.lab = LabUse::kBringUp;
  t.interrupted = opt.interrupted;
  t.progress = opt.progress;
  t.log = ctx.logger();
  return t;
}

}  // namespace

RunResult run_experiment(const ExperimentSpec& spec, const RunOptions& opt) {
  const RunContext ctx(opt);
  auto type = make_experiment_type(spec.type);
  Target target = resolve_target(spec, target_options(opt, ctx));
  RunResult result;
  open_results(target.spec, ctx, result);
  try {
    type->run(target, ctx, result);
  } catch (const ResultsNotWritten&) {
    release_target(target, ctx.logger());  // the hosts were left as found: the lab goes as usual
    throw;
  }
  release_target(target, ctx.logger());
  return result;
}

}  // namespace ocslab::runner
