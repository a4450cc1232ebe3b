// `ocslab schedule generate`: a training job's parallel configuration (model shape, TP/DP/PP/CP/EP
// sizes, pipeline schedule and micro-batches, gradient sharding, MoE experts) turned into the
// collective schedule the workloads run (schedule.h), every op's bytes derived from the shape
// (docs/workloads.md, "Generating a schedule"). Ranks are numbered as the phase controller's job
// layout numbers them (stage-major, dims[0] fastest), so the schedule runs under the controller
// unchanged; the generator also predicts how often a step rewires the rail on demand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ocslab/phase/topology.h"
#include "ocslab/workloads/schedule.h"

namespace ocslab::workloads {

enum class PipelineKind { kGPipe, k1F1B };
enum class Sharding { kNone, kZero1, kZero2, kZero3, kFsdp };

// The parallel configuration file (docs/workloads.md, "Generating a schedule").
struct GeneratorConfig {
  std::string origin;  // file path (or label) for messages
  std::string name;
  std::string model_kind = "transformer";  // transformer or dlrm
  int ranks = 0;
  int steps = 3;
  int warmup = 1;
  // transformer shape
  int layers = 0, hidden = 0, heads = 0;
  int64_t sequence = 0, vocabulary = 0, micro_batch = 1;
  std::string dtype = "bf16";
  int dtype_bytes = 2;
  // dlrm shape: `batch` samples per rank, `tables` embedding tables of `embedding_dim` columns
  // (sharded over the ranks), `dense_params` replicated MLP parameters
  int64_t batch = 0, tables = 0, embedding_dim = 0, dense_params = 0;
  // parallel sizes: their product is `ranks`
  int tp = 1, dp = 1, pp = 1, cp = 1, ep = 1;
  PipelineKind pipeline = PipelineKind::k1F1B;
  int micro_batches = 1;
  Sharding sharding = Sharding::kNone;
  int experts = 0, top_k = 0;  // MoE: experts per MoE layer (sharded over EP), experts per token
  uint64_t scale_down = 1;     // every derived byte count is divided by this (docs: "Scaling")
};

// Throws ocslab::ConfigError "origin:line:col: ..." for malformed or inconsistent input: sizes
// whose product is not `ranks`, a PP size that does not divide the layers, an unknown pipeline
// schedule or sharding, a shape that does not divide by the parallel sizes.
GeneratorConfig parse_generator_config(const std::string& text, const std::string& origin);
GeneratorConfig load_generator_config(const std::string& path);

struct GeneratedSchedule {
  std::string yaml;                   // the schedule file, comments included
  Schedule schedule;                  // `yaml` as parse_schedule reads it back
  phase::JobLayout layout;            // the controller's job (pp, dims with size > 1: tp, cp, ep, dp)
  phase::TopoId initial;              // every stage on its first dimension (all 0 without dims)
  std::vector<int> reconfigurations;  // per step, warm-up included, on demand from `initial`
  std::string summary;                // what `ocslab schedule generate` prints
};

GeneratedSchedule generate_schedule(const GeneratorConfig& cfg);

// How often each step of `s` changes the rail's circuits on demand, starting from `initial`:
// every op of a fabric group (not world) sets its group's digit on the stages of its members,
// and an op whose topo_id composes to other rank edges than the current one counts (as the
// controller reconfigures only when circuits change). One entry per step, warm-up included.
std::vector<int> predict_reconfigurations(const Schedule& s, const phase::JobLayout& layout,
                                          const phase::TopoId& initial);

}  // namespace ocslab::workloads
