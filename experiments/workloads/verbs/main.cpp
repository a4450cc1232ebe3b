// ocslab-collbench-verbs: runs a collective schedule (docs/workloads.md) over ibverbs RC in
// host memory, one process per rank, and prints an nccl-tests-like table on rank 0.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/workloads/collbench_main.h"
#include "verbs_backend.h"

namespace po = boost::program_options;
using namespace ocslab;
using namespace ocslab::workloads;

namespace {

constexpr const char* kUsage =
    R"(usage: ocslab-collbench-verbs --schedule FILE --rank R (--ranks H0,H1,... | --rendezvous HOST:PORT) --if IFACE [options]
       ocslab-collbench-verbs [-b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -c CHECK -o OP -J FILE] --if IFACE [--rank R ...]

Runs every collective of the schedule's step (ring allreduce / allgather / reducescatter,
send/recv, barrier; float32 sum) over ibverbs RC queue pairs on the RoCE device of IFACE,
one process per rank. Rank 0 listens for the TCP bootstrap; the others connect to it.
Every result is checked against the exact expected values. Rank 0 prints a table like
nccl-tests'; with --output each rank writes ops-rank<R>.csv and timeline-rank<R>.csv.

Without --schedule it is nccl-tests' all_reduce_perf (or --collective allgather, reducescatter,
sendrecv) over every rank: sizes -b..-e (x -f or + -i), -n timed iterations per size after -w
warm-up ones, -c checked ones, reduction -o (sum, prod, max, min, avg, all), time per -a, the
nccl-tests table on rank 0 and with -J its JSON document. Host memory: -g 1, -d float only.

Example (two hosts, rank 0 on h1):
  h1$ ocslab-collbench-verbs -s dp-pp.yaml --ranks h1,h2 --rank 0 --if eth1 --output out
  h2$ ocslab-collbench-verbs -s dp-pp.yaml --ranks h1,h2 --rank 1 --if eth1 --output out
  h1$ ocslab-collbench-verbs -b 8 -e 8M -f 2 -n 20 -w 5 -c 1 -J out.json --ranks h1,h2 --rank 0 --if eth1

With --controller HOST:PORT --job NAME the phase shim asks the job's phase controller
(`ocslab controller`) to wire the fabric for each op's group before it runs
(--phase-mode on-demand) or ahead of it (--phase-mode provisioning); the controller's token
comes from --controller-token-file FILE (mode 0600) or $OCSLAB_CONTROLLER_TOKEN, never argv;
see docs/workloads.md.

Exit codes (table below): 0 all results exact; 1 bad command line or a missing option; 2 bad
input or a transport failure (the message says which); 4 a rendezvous peer cannot be reached or
dropped the connection; 7 some result wrong.

)";

void add_verbs_options(po::options_description& desc) {
  desc.add_options()("if", po::value<std::string>(),
                     "network interface of the RoCE port (selects the RDMA device and its RoCE v2 GID)")(
      "group-if", po::value<std::vector<std::string>>()->composing(),
      "GROUP=IFACE: run that group's ops on another interface (repeatable; same on every rank)")(
      "peer-if", po::value<std::vector<std::string>>()->composing(),
      "RANK=IFACE: this rank's queue pairs with RANK use IFACE's device (repeatable; per rank: a host whose NICs "
      "each have a circuit to one neighbour)")(
      "ib-port", po::value<int>()->default_value(1), "port of the RDMA device")(
      "qp-timeout", po::value<int>(),
      "RC local ACK timeout exponent: 4.096 us x 2^N (0..31); default: NCCL_IB_TIMEOUT when set (as NCCL's IB "
      "transport reads it), else 14")(
      "qp-retry", po::value<int>(), "RC retry count (0..7); default: NCCL_IB_RETRY_CNT when set, else 7")(
      "max-msg", po::value<std::string>(),
      "split transfers into SENDs of at most this size (e.g. 64KiB; default: the "
      "device's limit, at most 1GiB)");
}

// The KEY=VALUE values of a repeatable option, in order; a value without both halves is refused
// naming the option and the form it wants.
std::vector<std::pair<std::string, std::string>> assignments(const po::variables_map& vm, const std::string& option,
                                                              const std::string& want) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!vm.count(option)) return out;
  for (const auto& v : vm[option].as<std::vector<std::string>>()) {
    auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
      throw Error("--" + option + " '" + v + "': want " + want);
    out.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  return out;
}

// A queue-pair setting: the option when given, else the NCCL variable NCCL's IB transport takes
// it from (so a survival sweep's NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT reach this program as they
// reach NCCL), else the default; each refused outside 0..max, naming where it came from.
int qp_setting(const po::variables_map& vm, const std::string& option, const char* variable, int fallback, int max) {
  if (vm.count(option)) {
    const int v = vm[option].as<int>();
    if (v < 0 || v > max) throw Error(fmt::format("--{} must be 0..{}, got {}", option, max, v));
    return v;
  }
  const char* env = std::getenv(variable);
  if (!env || !*env) return fallback;
  const std::string_view text(env);
  int v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0 || v > max)
    throw Error(fmt::format("{}='{}': want 0..{} (it sets --{})", variable, text, max, option));
  return v;
}

int run_verbs(const po::variables_map& vm, const Job& job) {
  const CommonOptions& o = job.options;
  if (vm.count("ngpus") && vm["ngpus"].as<int>() != 1) {
    throw Error(
        fmt::format("-g/--ngpus {}: ocslab-collbench-verbs reduces in host memory, one rank per process; "
                    "only -g 1 (start one process per rank)",
                    vm["ngpus"].as<int>()));
  }
  if (!vm.count("if")) throw MissingOption("missing --if IFACE (the network interface of the RoCE port)");
  VerbsOptions vo;
  vo.interface = vm["if"].as<std::string>();
  for (const auto& [group, iface] : assignments(vm, "group-if", "GROUP=IFACE")) vo.group_iface[group] = iface;
  for (const auto& [key, iface] : assignments(vm, "peer-if", "RANK=IFACE (a rank number)")) {
    int peer = -1;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), peer);
    if (ec != std::errc() || end != key.data() + key.size() || peer < 0)
      throw Error("--peer-if '" + key + "=" + iface + "': want RANK=IFACE (a rank number)");
    if (peer >= job.schedule.ranks || peer == o.rank)
      throw Error(fmt::format("--peer-if '{}={}': no rank {} to talk to (ranks 0..{}, this rank {})", key, iface, peer,
                              job.schedule.ranks - 1, o.rank));
    vo.peer_iface[peer] = iface;
  }
  vo.port = vm["ib-port"].as<int>();
  const int t = qp_setting(vm, "qp-timeout", "NCCL_IB_TIMEOUT", 14, 31);
  const int r = qp_setting(vm, "qp-retry", "NCCL_IB_RETRY_CNT", 7, 7);
  vo.timeout = static_cast<uint8_t>(t);
  vo.retry_cnt = static_cast<uint8_t>(r);
  vo.op_timeout = o.timeout;
  if (vm.count("max-msg")) {
    vo.max_msg_bytes = parse_bytes(vm["max-msg"].as<std::string>());
    if (vo.max_msg_bytes < 4) throw Error("--max-msg must be at least 4 bytes");
  }
  return run_job(job, "verbs",
                 [&](Rendezvous& rv) { return std::make_unique<VerbsBackend>(job.schedule, o.rank, vo, rv); });
}

}  // namespace

int main(int argc, char** argv) {
  return collbench_main(
      argc, argv,
      {.name = "ocslab-collbench-verbs", .usage = kUsage, .add_options = add_verbs_options, .run = run_verbs});
}
