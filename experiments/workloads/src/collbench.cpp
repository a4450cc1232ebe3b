#include "ocslab/workloads/collbench.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <ostream>

#include "ocslab/common/clock.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/common/secret.h"
#include "ocslab/common/exit_code.h"

namespace po = boost::program_options;

namespace ocslab::workloads {

namespace {

int env_int(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        throw Error(fmt::format("environment variable {}='{}' is not a number", n, v));
      }
    }
  }
  return -1;
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

void host_compute(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return;
  constexpr int64_t kSpinNs = 200'000;  // the last 200 us: a sleep can overshoot by ~50-100 us
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t end = ts.tv_sec * 1'000'000'000LL + ts.tv_nsec + d.count();
  if (d.count() > kSpinNs) {
    const int64_t wake = end - kSpinNs;
    timespec w{static_cast<time_t>(wake / 1'000'000'000LL), static_cast<long>(wake % 1'000'000'000LL)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &w, nullptr) == EINTR) {
    }
  }
  for (;;) {
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    if (ts.tv_sec * 1'000'000'000LL + ts.tv_nsec >= end) return;
  }
}

void add_common_options(po::options_description& d) {
  // -n and -o are nccl-tests' --iters and --op (sweep.h); world size and output folder are long only.
  d.add_options()("schedule,s", po::value<std::string>(),
                  "schedule file (YAML, docs/workloads.md); without it: nccl-tests' size sweep")(
      "rank,r", po::value<int>(), "this process's rank (default: OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID)")(
      "nranks", po::value<int>(), "world size (default: the launcher's, else the schedule's ranks)")(
      "rendezvous", po::value<std::string>(),
      "HOST:PORT where rank 0 listens for the bootstrap (default: OCSLAB_RENDEZVOUS)")(
      "rendezvous-token-file", po::value<std::string>(),
      "file holding the run's rendezvous token (hex, mode 0600, owned by you); every rank must give the same; "
      "else $OCSLAB_RENDEZVOUS_TOKEN; without one rank 0 takes any connection")(
      "rendezvous-listen", po::value<std::string>(),
      "rank 0's bind address (default: the host of --rendezvous itself; 0.0.0.0 or :: for all addresses)")(
      "ranks", po::value<std::string>(),
      "comma-separated host of each rank (rank 0 first); implies --nranks and "
      "--rendezvous RANK0HOST:PORT")("port", po::value<int>()->default_value(18600), "rendezvous port with --ranks")(
      "host", po::value<std::string>(), "host name written in the records (default: hostname)")(
      "output", po::value<std::string>(), "schedule: folder for ops-rank<R>.csv and timeline-rank<R>.csv")(
      "timeout-s", po::value<double>()->default_value(120),
      "longest wait for a peer (bootstrap, one op, the final gather)")(
      "steps", po::value<int>(), "measured steps (default: the schedule's)")("warmup", po::value<int>(),
                                                                             "warm-up steps (default: the schedule's)")(
      "no-verify", "do not check results (the data is still filled)");
}

CommonOptions common_options(const po::variables_map& vm) {
  CommonOptions o;
  if (vm.count("schedule")) o.schedule_path = vm["schedule"].as<std::string>();
  o.rank = vm.count("rank") ? vm["rank"].as<int>() : env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  o.nranks =
      vm.count("nranks") ? vm["nranks"].as<int>() : env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  if (vm.count("ranks")) {
    std::vector<std::string> hosts;
    std::string list = vm["ranks"].as<std::string>();
    size_t start = 0;
    for (;;) {
      size_t comma = list.find(',', start);
      std::string h = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (h.empty()) throw Error("--ranks '" + list + "': empty host name");
      hosts.push_back(h);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    int n = static_cast<int>(hosts.size());
    if (o.nranks >= 0 && o.nranks != n) {
      throw Error(fmt::format("--ranks lists {} host(s) but the world size is {}", n, o.nranks));
    }
    o.nranks = n;
    o.rendezvous = fmt::format("{}:{}", hosts[0], vm["port"].as<int>());
    if (o.rank >= 0 && o.rank < n && !vm.count("host")) o.host = hosts[static_cast<size_t>(o.rank)];
  }
  if (vm.count("rendezvous")) o.rendezvous = vm["rendezvous"].as<std::string>();
  if (o.rendezvous.empty()) {
    const char* e = std::getenv("OCSLAB_RENDEZVOUS");
    if (e && *e) o.rendezvous = e;
  }
  if (vm.count("rendezvous-token-file")) {
    o.rendezvous_token = read_secret_file(vm["rendezvous-token-file"].as<std::string>(), "--rendezvous-token-file");
  } else if (const char* e = std::getenv("OCSLAB_RENDEZVOUS_TOKEN"); e && *e) {
    o.rendezvous_token = e;
  }
  if (o.rendezvous_token.size() > kMaxTokenChars ||
      o.rendezvous_token.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw Error(fmt::format("the rendezvous token (--rendezvous-token-file or OCSLAB_RENDEZVOUS_TOKEN) must be 1 to {} "
                            "lowercase hex digits",
                            kMaxTokenChars));
  }
  if (vm.count("rendezvous-listen")) o.rendezvous_listen = vm["rendezvous-listen"].as<std::string>();
  if (vm.count("host")) o.host = vm["host"].as<std::string>();
  if (o.host.empty()) o.host = hostname();
  if (vm.count("output")) o.output = vm["output"].as<std::string>();
  double t = vm["timeout-s"].as<double>();
  if (!(t > 0)) throw Error("--timeout-s must be positive");
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(t * 1000));
  o.verify = !vm.count("no-verify");
  if (vm.count("steps")) o.steps = vm["steps"].as<int>();
  if (vm.count("warmup")) o.warmup = vm["warmup"].as<int>();
  return o;
}

int launcher_local_rank() {
  return env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"});
}

std::vector<OpRecord> run_steps(const Schedule& s, int rank, const std::string& host, Backend& backend,
                                PhaseHooks& hooks, bool verify, const std::function<void(const OpRecord&)>& on_record) {
  std::vector<OpRecord> records;
  int total = s.warmup + s.steps;
  uint64_t per_step = s.step.size();
  // Spends a drawn compute time on the backend; returns what it took (0 without one).
  auto compute = [&](const Op& op, const ComputeTime& c, int step, int index) -> int64_t {
    int64_t d = c.draw_ns(s.seed, rank, step, index);
    if (d <= 0) return 0;
    Timestamp c0 = now();
    backend.compute(op, std::chrono::nanoseconds(d));
    return now().monotonic_ns - c0.monotonic_ns;
  };
  for (int step = 0; step < total; ++step) {
    bool first_of_step = true;
    for (size_t i = 0; i < s.step.size(); ++i) {
      const Op& op = s.step[i];
      if (!s.involves(op, rank)) continue;
      const Group& g = s.group_of(op);
      uint64_t seq = static_cast<uint64_t>(step) * per_step + i;
      backend.prepare(op, seq);
      // Compute comes before the pre hook: the previous op's post hook may have asked for the
      // next topology, and the switch moves while this rank computes (provisioning).
      int64_t step_compute_ns = 0;
      if (first_of_step) step_compute_ns = compute(op, s.step_compute, step, kStepCompute);
      first_of_step = false;
      int64_t compute_ns = compute(op, op.compute, step, static_cast<int>(i));

      OpDesc d;
      d.group = g.name;
      d.kind = g.kind;
      d.type = op.type;
      d.bytes = op.bytes;
      d.step = step;
      d.index = static_cast<int>(i);
      d.seq = seq;
      d.rank = rank;
      d.ranks = &g.ranks;
      d.src = op.src;
      d.dst = op.dst;

      OpRecord r;
      r.rank = rank;
      r.host = host;
      r.step = step;
      r.warmup = step < s.warmup;
      r.index = static_cast<int>(i);
      r.seq = seq;
      r.group = g.name;
      r.kind = g.kind;
      r.type = op.type;
      r.group_size = static_cast<int>(g.ranks.size());
      r.bytes = op.bytes;
      r.compute_ns = compute_ns;
      r.step_compute_ns = step_compute_ns;

      Timestamp w0 = now();
      hooks.pre_communication(d);
      Timestamp t0 = now();
      backend.run(op);
      Timestamp t1 = now();
      hooks.post_communication(d);
      Timestamp w1 = now();
      HookOutcome oc = hooks.outcome(d);
      r.phase = oc.phase;
      r.reconfigured = oc.reconfigured;
      r.provisioned = oc.provisioned;
      r.barrier = oc.barrier;
      r.fallback = oc.fallback;
      r.topo = oc.topo;

      r.wait_start_ns = w0.realtime_ns;
      r.start_ns = t0.realtime_ns;
      r.end_ns = t1.realtime_ns;
      r.duration_ns = t1.monotonic_ns - t0.monotonic_ns;
      r.wait_ns = (t0.monotonic_ns - w0.monotonic_ns) + (w1.monotonic_ns - t1.monotonic_ns);
      if (verify) {
        r.wrong = backend.verify(op, seq);
        r.verified = true;
      }
      if (r.wrong > 0) {
        std::cerr << fmt::format("rank {}: {} on group '{}' ({}:{}), step {}: {} of {} result element(s) wrong\n", rank,
                                 op_name(op.type), g.name, s.origin, op.line, step, r.wrong, op.bytes / 4);
      }
      records.push_back(r);
      if (on_record) on_record(records.back());
    }
  }
  return records;
}

OutputWriter::OutputWriter(const std::string& folder, int rank) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw Error("cannot create the output folder " + folder + ": " + ec.message());
  ops_ = std::make_unique<CsvWriter>(fmt::format("{}/ops-rank{}.csv", folder, rank));
  ops_->header(op_csv_columns());
  timeline_ = std::make_unique<CsvWriter>(fmt::format("{}/timeline-rank{}.csv", folder, rank));
  timeline_->header(sample_csv_columns());
  ops_->flush();
  timeline_->flush();
}

void OutputWriter::add(const OpRecord& r) {
  ops_->row(op_csv_fields(r));
  for (const auto& smp : op_samples(r)) timeline_->row(sample_csv_fields(smp));
  ops_->flush();
  timeline_->flush();
}

void OutputWriter::close() {
  ops_->close();
  timeline_->close();
}

void write_outputs(const std::string& folder, int rank, const std::vector<OpRecord>& records) {
  OutputWriter w(folder, rank);
  for (const auto& r : records) w.add(r);
  w.close();
}

std::string rendezvous_tag(const Schedule& s, const std::string& backend_name) {
  return fmt::format("{} {} ranks={} ops={} steps={} warmup={} digest={:016x}", backend_name, s.name, s.ranks,
                     s.step.size(), s.steps, s.warmup, s.digest());
}

int run_and_report(const Schedule& s, const CommonOptions& o, const std::string& backend_name, Backend& backend,
                   PhaseHooks& hooks, Rendezvous& rv) {
  // A transport failure throws out of here: the peers then see this rank's rendezvous
  // connection close and stop with a message naming it. Wrong data is recorded and reported.
  // The rank's files get each op as it completes: a failure (or a kill) keeps what ran.
  std::unique_ptr<OutputWriter> out;
  if (!o.output.empty()) out = std::make_unique<OutputWriter>(o.output, o.rank);
  std::vector<OpRecord> records =
      run_steps(s, o.rank, o.host, backend, hooks, o.verify, [&](const OpRecord& r) {
        if (out) out->add(r);
      });
  if (out) out->close();
  uint64_t my_wrong = 0;
  for (const auto& r : records) my_wrong += r.wrong;
  auto all_blobs = rv.all_gather(encode_records(records));
  if (o.rank != 0) return my_wrong == 0 ? kExitOk : kExitMismatch;

  std::vector<OpRecord> all;
  for (const auto& blob : all_blobs) {
    auto recs = decode_records(blob);
    all.insert(all.end(), recs.begin(), recs.end());
  }
  print_table(std::cout, s, backend_name, summarize(all), all);
  std::cout.flush();
  uint64_t wrong = 0;
  for (const auto& r : all) wrong += r.wrong;
  return wrong == 0 ? kExitOk : kExitMismatch;
}

}  // namespace ocslab::workloads
