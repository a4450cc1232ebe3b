#include "ocslab/workloads/sweep.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/workloads/ring.h"

extern char** environ;

namespace po = boost::program_options;

namespace ocslab::workloads {

namespace {

// The sweep options: value name in vm, how a message names it.
constexpr std::pair<const char*, const char*> kSweepOptions[] = {
    {"minbytes", "-b/--minbytes"},   {"maxbytes", "-e/--maxbytes"},
    {"stepbytes", "-i/--stepbytes"}, {"stepfactor", "-f/--stepfactor"},
    {"iters", "-n/--iters"},         {"warmup_iters", "-w/--warmup_iters"},
    {"check", "-c/--check"},         {"op", "-o/--op"},
    {"datatype", "-d/--datatype"},   {"average", "-a/--average"},
    {"ngpus", "-g/--ngpus"},         {"output_file", "-J/--output_file"},
    {"collective", "--collective"},  {"root", "--root"}};

int int_option(const po::variables_map& vm, const char* name, int fallback, int lowest, const char* what) {
  if (!vm.count(name)) return fallback;
  int v = vm[name].as<int>();
  if (v < lowest) throw Error(fmt::format("{} {}: must be at least {}", what, v, lowest));
  return v;
}

uint64_t size_option(const po::variables_map& vm, const char* name, uint64_t fallback, const char* what) {
  if (!vm.count(name)) return fallback;
  try {
    return parse_sweep_size(vm[name].as<std::string>());
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", what, e.what()));
  }
}

OpType parse_collective(const std::string& name) {
  for (OpType t : {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter, OpType::kSendRecv,
                   OpType::kAllToAll, OpType::kBroadcast}) {
    if (name == op_name(t)) return t;
  }
  if (name == op_name(OpType::kAllToAllV)) {
    throw Error("--collective alltoallv: its per-pair sizes are a matrix, which a size sweep has no place for; give "
                "it in a schedule (--schedule, docs/workloads.md), or sweep --collective alltoall");
  }
  throw Error("--collective '" + name + "': want allreduce, allgather, reducescatter, sendrecv, alltoall or broadcast");
}

bool reduces(OpType t) { return t == OpType::kAllReduce || t == OpType::kReduceScatter; }

// Per-rank floats an op of `bytes` splits into (allgather / reducescatter: n equal parts;
// alltoall: one block per rank, nccl-tests' count column being one block).
uint64_t unit_floats(OpType t, int nranks) {
  return t == OpType::kAllGather || t == OpType::kReduceScatter || t == OpType::kAllToAll
             ? static_cast<uint64_t>(nranks)
             : 1;
}

std::string now_string() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// A figure in a column of `width` characters: two decimals, fewer when it does not fit, then
// scientific notation, as nccl-tests' table keeps its columns aligned.
std::string fit(double v, size_t width) {
  for (int precision : {2, 1, 0}) {
    std::string f = fmt::format("{:>{}.{}f}", v, width, precision);
    if (f.size() <= width) return f;
  }
  return fmt::format("{:>{}.{}e}", v, width, width >= 7 ? 1 : 0);
}

std::string size_line(const SweepOptions& w) {
  return w.step_factor > 1 ? fmt::format("step: {}(factor)", w.step_factor)
                           : fmt::format("step: {}(bytes)", w.step_bytes);
}

}  // namespace

void add_sweep_options(po::options_description& d) {
  d.add_options()("minbytes,b", po::value<std::string>(), "size sweep: smallest size (K, M, G suffixes; default 32M)")(
      "maxbytes,e", po::value<std::string>(), "size sweep: largest size (default 32M)")(
      "stepbytes,i", po::value<std::string>(), "size sweep: fixed increment when -f is 1 (default 1M)")(
      "stepfactor,f", po::value<std::string>(), "size sweep: multiplication factor between sizes (default 1: use -i)")(
      "iters,n", po::value<int>(), "size sweep: timed iterations per size (default 20)")(
      "warmup_iters,w", po::value<int>(), "size sweep: warm-up iterations per size, not timed (default 1)")(
      "check,c", po::value<int>(), "size sweep: checked iterations per size after the timed ones; 0 none (default 1)")(
      "op,o", po::value<std::string>(), "size sweep: reduction sum, prod, max, min, avg or all (default sum)")(
      "datatype,d", po::value<std::string>(), "size sweep: element type; float only (default float)")(
      "average,a", po::value<int>(),
      "size sweep: time reported: 0 rank 0's, 1 mean over ranks, 2 min, 3 max (default 1)")(
      "ngpus,g", po::value<int>(), "size sweep: GPUs per process; 1 (default 1)")(
      "output_file,J", po::value<std::string>(), "size sweep: write nccl-tests' JSON document to this file (rank 0)")(
      "collective", po::value<std::string>(),
      "size sweep: allreduce (default), allgather, reducescatter, sendrecv (2 ranks), alltoall or broadcast "
      "(nccl-tests: all_reduce_perf, ..., alltoall_perf, broadcast_perf)")(
      "root", po::value<int>(), "size sweep: broadcast's root rank (nccl-tests' -r, here -r is --rank; default 0)");
}

std::vector<std::string> sweep_options_given(const po::variables_map& vm) {
  std::vector<std::string> given;
  for (const auto& [name, what] : kSweepOptions) {
    if (vm.count(name)) given.emplace_back(what);
  }
  return given;
}

SweepOptions sweep_options(const po::variables_map& vm) {
  SweepOptions w;
  if (vm.count("collective")) w.collective = parse_collective(vm["collective"].as<std::string>());
  if (vm.count("root")) {
    if (w.collective != OpType::kBroadcast) throw Error("--root is for --collective broadcast");
    w.root = vm["root"].as<int>();
    if (w.root < 0) throw Error(fmt::format("--root {}: a rank is 0 or more", w.root));
  }
  w.min_bytes = size_option(vm, "minbytes", w.min_bytes, "-b/--minbytes");
  w.max_bytes = size_option(vm, "maxbytes", w.max_bytes, "-e/--maxbytes");
  w.step_bytes = size_option(vm, "stepbytes", w.step_bytes, "-i/--stepbytes");
  if (vm.count("stepfactor")) {
    const std::string& f = vm["stepfactor"].as<std::string>();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(f.c_str(), &end, 0);
    if (f.empty() || *end != '\0' || errno != 0 || v < 1) {
      throw Error("-f/--stepfactor '" + f + "': want a whole number >= 1 (1: add -i instead)");
    }
    w.step_factor = static_cast<uint64_t>(v);
  }
  if (w.min_bytes == 0) throw Error("-b/--minbytes must be at least 1 byte");
  if (w.max_bytes < w.min_bytes) {
    throw Error(fmt::format("-e/--maxbytes {} is below -b/--minbytes {}", w.max_bytes, w.min_bytes));
  }
  if (w.step_factor <= 1 && w.step_bytes == 0 && w.max_bytes > w.min_bytes) {
    throw Error("-i/--stepbytes 0 with -f 1 never reaches -e/--maxbytes");
  }
  w.iters = int_option(vm, "iters", w.iters, 1, "-n/--iters");
  w.warmup_iters = int_option(vm, "warmup_iters", w.warmup_iters, 0, "-w/--warmup_iters");
  w.check = int_option(vm, "check", w.check, 0, "-c/--check");
  w.average = int_option(vm, "average", w.average, 0, "-a/--average");
  if (w.average > 3)
    throw Error(fmt::format("-a/--average {}: want 0 (rank 0), 1 (mean), 2 (min) or 3 (max)", w.average));
  w.ngpus = int_option(vm, "ngpus", w.ngpus, 1, "-g/--ngpus");
  if (vm.count("op")) {
    const std::string& op = vm["op"].as<std::string>();
    if (op == "all") {
      w.redops = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
    } else {
      try {
        w.redops = {parse_redop(op)};
      } catch (const Error& e) {
        throw Error(std::string("-o/--op: ") + e.what());
      }
    }
  }
  if (vm.count("datatype")) {
    w.datatype = vm["datatype"].as<std::string>();
    if (w.datatype != "float") {
      throw Error("-d/--datatype '" + w.datatype +
                  "': the collbench programs move float32 only (their checks are exact float32 sums); use -d float");
    }
  }
  if (vm.count("output_file")) {
    w.output_file = vm["output_file"].as<std::string>();
    if (w.output_file.empty()) throw Error("-J/--output_file: empty file name");
  }
  return w;
}

uint64_t parse_sweep_size(std::string_view text) {
  std::string t(text);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end == t.c_str() || errno != 0 || !(v >= 0) || !std::isfinite(v)) {
    throw Error("bad size '" + t + "' (e.g. 8, 64K, 8M, 1G)");
  }
  std::string suffix(end);
  double mult = 1;
  if (!suffix.empty()) {
    char unit = suffix[0];
    std::string rest = suffix.substr(1);
    if (unit == 'K' || unit == 'k') {
      mult = 1024.0;
    } else if (unit == 'M' || unit == 'm') {
      mult = 1024.0 * 1024;
    } else if (unit == 'G' || unit == 'g') {
      mult = 1024.0 * 1024 * 1024;
    } else if (unit == 'B') {
      rest = rest.empty() ? "" : "?";
    } else {
      rest = "?";
    }
    if (!(rest.empty() || rest == "B" || rest == "iB")) {
      throw Error("bad size '" + t + "': unknown unit '" + suffix + "' (K, M or G)");
    }
  }
  double bytes = v * mult;
  if (bytes > 1099511627776.0) throw Error("size '" + t + "' is above 1T");
  return static_cast<uint64_t>(bytes);
}

std::vector<uint64_t> sweep_sizes(const SweepOptions& w) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = w.min_bytes; size <= w.max_bytes;
       size = w.step_factor > 1 ? size * w.step_factor : size + w.step_bytes) {
    sizes.push_back(size);
    if (w.step_factor <= 1 && w.step_bytes == 0) break;  // -b == -e
    if (sizes.size() > 100000) throw Error("the size sweep has more than 100000 sizes; raise -f or -i");
  }
  return sizes;
}

Schedule sweep_schedule(const SweepOptions& w, int nranks) {
  if (w.collective == OpType::kSendRecv && nranks != 2) {
    throw Error(
        fmt::format("--collective sendrecv runs between 2 ranks (rank 0 sends to rank 1); this job has {}", nranks));
  }
  if (w.collective == OpType::kBroadcast && w.root >= nranks) {
    throw Error(fmt::format("--root {}: this job has ranks 0..{}", w.root, nranks - 1));
  }
  Schedule s;
  s.origin = "size sweep";
  s.name = fmt::format("sweep-{}", op_name(w.collective));
  s.ranks = nranks;
  s.steps = w.iters;
  s.warmup = w.warmup_iters;
  Group g;
  g.name = "world";
  g.kind = "world";
  for (int r = 0; r < nranks; ++r) g.ranks.push_back(r);
  s.groups.push_back(g);
  const uint64_t unit = unit_floats(w.collective, nranks) * sizeof(float);
  std::vector<RedOp> redops = reduces(w.collective) ? w.redops : std::vector<RedOp>{RedOp::kSum};
  for (RedOp r : redops) {
    for (uint64_t size : sweep_sizes(w)) {
      Op op;
      op.group = 0;
      op.type = w.collective;
      op.redop = r;
      op.bytes = size / unit * unit;
      if (op.bytes == 0) {
        throw Error(fmt::format("size {} holds no float per rank: {} over {} rank(s) needs at least {} bytes", size,
                                op_name(w.collective), nranks, unit));
      }
      if (op.type == OpType::kSendRecv) {
        op.src = 0;
        op.dst = 1;
      }
      if (op.type == OpType::kBroadcast) op.root = w.root;
      s.step.push_back(op);
    }
  }
  return s;
}

SweepRankResult run_sweep(const Schedule& s, const SweepOptions& w, Backend& backend, Rendezvous& rv) {
  SweepRankResult res;
  const uint64_t per_step = s.step.size();
  // Warm-up: every size, as nccl-tests warms up before its timed sweep.
  for (size_t i = 0; i < s.step.size(); ++i) {
    backend.prepare(s.step[i], i);
    for (int it = 0; it < w.warmup_iters; ++it) backend.run(s.step[i]);
  }
  for (size_t i = 0; i < s.step.size(); ++i) {
    const Op& op = s.step[i];
    uint64_t seq = per_step + i;
    backend.prepare(op, seq);
    rv.barrier();  // every rank starts the timed loop together
    Timestamp t0 = now();
    for (int it = 0; it < w.iters; ++it) backend.run(op);
    Timestamp t1 = now();
    res.time_us.push_back(static_cast<double>(t1.monotonic_ns - t0.monotonic_ns) / 1e3 / w.iters);
    uint64_t wrong = 0;
    for (int c = 0; c < w.check; ++c) {
      // A fresh input per checked iteration: the timed ones left the buffer reduced many times over.
      uint64_t cseq = per_step * static_cast<uint64_t>(2 + c) + i;
      backend.prepare(op, cseq);
      backend.run(op);
      wrong += backend.verify(op, cseq);
    }
    res.wrong.push_back(wrong);
  }
  return res;
}

std::vector<SweepRow> combine_sweep(const Schedule& s, const SweepOptions& w,
                                    const std::vector<SweepRankResult>& ranks) {
  std::vector<SweepRow> rows;
  const int n = s.ranks;
  for (size_t i = 0; i < s.step.size(); ++i) {
    const Op& op = s.step[i];
    SweepRow row;
    row.bytes = op.bytes;
    row.count = op.bytes / sizeof(float) / unit_floats(op.type, n);
    row.redop = op.redop;
    row.type = op.type;
    row.root = op.type == OpType::kBroadcast ? op.root : -1;
    row.checked = w.check > 0;
    double t = 0;
    for (size_t r = 0; r < ranks.size(); ++r) {
      double tr = ranks[r].time_us.at(i);
      row.wrong += ranks[r].wrong.at(i);
      if (r == 0) {
        t = tr;
      } else if (w.average == 1) {
        t += tr;
      } else if (w.average == 2) {
        t = std::min(t, tr);
      } else if (w.average == 3) {
        t = std::max(t, tr);
      }
    }
    if (w.average == 1 && !ranks.empty()) t /= static_cast<double>(ranks.size());
    row.time_us = t;
    row.algbw = algbw_gbps(row.bytes, t / 1e6);
    row.busbw = busbw_gbps(op.type, n, row.bytes, t / 1e6);
    rows.push_back(row);
  }
  return rows;
}

std::string encode_sweep_result(const SweepRankResult& r) {
  std::string out;
  for (size_t i = 0; i < r.time_us.size(); ++i) out += fmt::format("{:.17g} {}\n", r.time_us[i], r.wrong[i]);
  return out;
}

SweepRankResult decode_sweep_result(const std::string& blob) {
  SweepRankResult r;
  std::istringstream in(blob);
  double t = 0;
  uint64_t wrong = 0;
  while (in >> t >> wrong) {
    r.time_us.push_back(t);
    r.wrong.push_back(wrong);
  }
  return r;
}

std::string encode_sweep_device(const SweepDevice& d) {
  return fmt::format("{}\n{}\n{}\n{}", d.rank, d.pid, d.host, d.device);
}

SweepDevice decode_sweep_device(const std::string& blob) {
  SweepDevice d;
  std::istringstream in(blob);
  std::string line;
  std::getline(in, line);
  d.rank = std::atoi(line.c_str());
  std::getline(in, line);
  d.pid = std::atoi(line.c_str());
  std::getline(in, d.host);
  std::getline(in, d.device);
  return d;
}

double sweep_avg_busbw(const std::vector<SweepRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const auto& r : rows) sum += r.busbw;
  return sum / static_cast<double>(rows.size());
}

void print_sweep_table(std::ostream& out, const SweepOptions& w, const SweepReport& r) {
  out << fmt::format("# {} ({}): {}, {} rank(s)\n", r.program, r.backend, op_name(w.collective), r.nranks);
  out << fmt::format(
      "# nThread 1 nGpus {} minBytes {} maxBytes {} {} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: "
      "0\n",
      w.ngpus, w.min_bytes, w.max_bytes, size_line(w), w.warmup_iters, w.iters, w.check);
  out << "#\n# Using devices\n";
  for (const auto& d : r.devices) {
    out << fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10} device  0 [{}]\n", d.rank, d.pid, d.host, d.device);
  }
  out << "#\n";
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}                 in-place\n", "", "", "", "", "");
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n", "size", "count", "type",
                     "redop", "root", "time", "algbw", "busbw", "#wrong");
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n", "(B)", "(elements)", "", "",
                     "", "(us)", "(GB/s)", "(GB/s)", "");
  uint64_t wrong = 0;
  for (const auto& row : r.rows) {
    wrong += row.wrong;
    std::string redop = reduces(row.type) ? std::string(redop_name(row.redop)) : "none";
    out << fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {}  {}  {:>6}\n", row.bytes, row.count, w.datatype,
                       redop, row.root, fit(row.time_us, 7), fit(row.algbw, 6), fit(row.busbw, 6),
                       row.checked ? std::to_string(row.wrong) : "N/A");
  }
  out << fmt::format("# {:<20} : {} {}\n", "Out of bounds values", wrong, wrong ? "FAILED" : "OK");
  out << fmt::format("# {:<20} : {:g} \n", "Avg bus bandwidth", sweep_avg_busbw(r.rows));
  out << "#\n";
  out << fmt::format("# Collective test concluded: {}\n", r.program);
}

nlohmann::ordered_json sweep_json(const SweepOptions& w, const SweepReport& r) {
  using json = nlohmann::ordered_json;
  json j;
  j["version"] = 3;
  j["start_time"] = r.start_time;
  j["args"] = r.args;
  json env = json::array();
  for (char** e = environ; e && *e; ++e) {
    std::string_view v(*e);
    for (std::string_view p : {"NCCL_", "OCSLAB_", "OMPI_", "PMI_", "SLURM_", "CUDA_"}) {
      if (v.substr(0, p.size()) == p) {
        env.push_back(std::string(v));
        break;
      }
    }
  }
  j["env"] = env;
  j["program"] = r.program;
  j["backend"] = r.backend;
  json cfg;
  cfg["nthreads"] = 1;
  cfg["ngpus"] = w.ngpus;
  cfg["minimum_bytes"] = w.min_bytes;
  cfg["maximum_bytes"] = w.max_bytes;
  if (w.step_factor > 1) {
    cfg["step_factor"] = w.step_factor;
  } else {
    cfg["step_bytes"] = w.step_bytes;
  }
  cfg["warmup_iters"] = w.warmup_iters;
  cfg["iterations"] = w.iters;
  cfg["aggregated_iterations"] = 1;
  cfg["validation"] = w.check;
  cfg["graph"] = 0;
  cfg["blocking_collectives"] = true;
  cfg["average"] = w.average;
  cfg["collective"] = std::string(op_name(w.collective));
  cfg["nranks"] = r.nranks;
  json devices = json::array();
  for (const auto& d : r.devices) {
    devices.push_back({{"rank", d.rank},
                       {"group", 0},
                       {"pid", d.pid},
                       {"hostname", d.host},
                       {"device", 0},
                       {"device_hex", ""},
                       {"device_info", d.device}});
  }
  cfg["devices"] = devices;
  j["config"] = cfg;
  json results = json::array();
  uint64_t wrong = 0;
  for (const auto& row : r.rows) {
    wrong += row.wrong;
    json in_place = {{"time", row.time_us}, {"alg_bw", row.algbw}, {"bus_bw", row.busbw}};
    in_place["nwrong"] = row.checked ? json(static_cast<double>(row.wrong)) : json(nullptr);
    results.push_back({{"size", row.bytes},
                       {"count", row.count},
                       {"type", w.datatype},
                       {"redop", reduces(row.type) ? std::string(redop_name(row.redop)) : "none"},
                       {"root", fmt::format("{:>6}", row.root)},
                       {"out_of_place", nullptr},
                       {"in_place", in_place},
                       {"actual_iterations", w.iters},
                       {"experiment_name", ""}});
  }
  j["results"] = results;
  j["out_of_bounds"] = {{"count", wrong}, {"okay", wrong == 0}};
  j["average_bus_bandwidth"] = {{"bandwidth", sweep_avg_busbw(r.rows)}, {"okay", "unchecked"}};
  j["errors"] = json::array();
  j["end_time"] = r.end_time;
  return j;
}

int run_sweep_and_report(const Schedule& s, const CommonOptions& o, const SweepOptions& w, const std::string& program,
                         const std::string& backend_name, Backend& backend, Rendezvous& rv,
                         const std::vector<std::string>& args) {
  SweepReport rep;
  rep.program = program;
  rep.backend = backend_name;
  rep.nranks = s.ranks;
  rep.args = args;
  rep.start_time = now_string();
  auto dev_blobs =
      rv.all_gather(encode_sweep_device({o.rank, static_cast<int>(::getpid()), o.host, backend.describe()}));
  SweepRankResult mine = run_sweep(s, w, backend, rv);
  uint64_t my_wrong = 0;
  for (uint64_t x : mine.wrong) my_wrong += x;
  auto blobs = rv.all_gather(encode_sweep_result(mine));
  if (o.rank != 0) return my_wrong == 0 ? kExitOk : kExitMismatch;

  for (const auto& b : dev_blobs) rep.devices.push_back(decode_sweep_device(b));
  std::vector<SweepRankResult> all;
  all.reserve(blobs.size());
  for (const auto& b : blobs) all.push_back(decode_sweep_result(b));
  rep.rows = combine_sweep(s, w, all);
  rep.end_time = now_string();
  print_sweep_table(std::cout, w, rep);
  std::cout.flush();
  if (!w.output_file.empty()) {
    std::ofstream f(w.output_file);
    if (!f) throw SystemError("cannot write -J/--output_file " + w.output_file, errno);
    f << sweep_json(w, rep).dump(2) << "\n";
    if (!f.flush()) throw SystemError("writing -J/--output_file " + w.output_file, errno);
  }
  uint64_t wrong = 0;
  for (const auto& row : rep.rows) wrong += row.wrong;
  return wrong == 0 ? kExitOk : kExitMismatch;
}

}  // namespace ocslab::workloads
