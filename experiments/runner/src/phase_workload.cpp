// Running a phase-workload experiment: per phase mode, the embedded controller + orchestrator
// over the spec's switch, the ranks (SSH or one mpirun / srun command), their files fetched,
// the per-step figures and the merged timeline.
#include "ocslab/runner/phase_workload.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <functional>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include "ocslab/common/clock.h"
#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/file.h"
#include "ocslab/common/process.h"
#include "ocslab/common/secret.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/experiment_type.h"
#include "ocslab/runner/remote_dir.h"
#include "ocslab/runner/run_context.h"
#include "ocslab/runner/runner.h"
#include "ocslab/runner/target.h"
#include "ocslab/workloads/shim_hooks.h"

namespace ocslab::runner {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------- per-step figures

std::vector<StepFigures> step_figures(const workloads::Schedule& s, const std::string& mode,
                                      const std::vector<workloads::OpRecord>& rows,
                                      const std::vector<phase::ControllerEvent>& events) {
  // rank -> step -> its rows in op order
  std::map<int, std::map<int, std::vector<const workloads::OpRecord*>>> by_rank;
  int last_step = -1;
  std::map<int, bool> warm;
  for (const auto& r : rows) {
    by_rank[r.rank][r.step].push_back(&r);
    last_step = std::max(last_step, r.step);
    warm[r.step] = r.warmup;
  }
  for (auto& [rank, steps] : by_rank) {
    for (auto& [st, v] : steps) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->index < b->index; });
    }
  }
  // A reconfiguration served (group, seq): the group's seq-th op counted over the steps.
  std::map<std::string, int> per_step;
  for (const auto& op : s.step) ++per_step[workloads::shim_group(s, op)];
  std::map<int, std::set<std::pair<std::string, int64_t>>> reconf;
  for (const auto& e : events) {
    if (e.kind != phase::ControllerEvent::Kind::kReconfigStart || e.value != 1) continue;
    auto it = per_step.find(e.group);
    if (it == per_step.end() || e.seq < 1) continue;
    reconf[static_cast<int>((e.seq - 1) / it->second)].insert({e.group, e.seq});
  }

  std::vector<StepFigures> out;
  for (int st = 0; st <= last_step; ++st) {
    StepFigures f;
    f.mode = mode;
    f.step = st;
    f.warmup = warm[st];
    f.step_ms = -1;
    std::set<int> reconfigured;
    for (auto& [rank, steps] : by_rank) {
      auto it = steps.find(st);
      if (it == steps.end() || it->second.empty()) continue;
      const auto& v = it->second;
      f.rows += static_cast<int>(v.size());
      double comm = 0, wait = 0;
      for (auto* r : v) {
        comm += static_cast<double>(r->duration_ns) / 1e6;
        wait += static_cast<double>(r->wait_ns) / 1e6;
        if (r->reconfigured) reconfigured.insert(r->index);
      }
      auto end_of = [](const workloads::OpRecord* r) {
        // end of the post hook: the pre hook took start - wait_start, the rest of wait_ns is the post hook's
        int64_t post = std::max<int64_t>(0, r->wait_ns - (r->start_ns - r->wait_start_ns));
        return r->end_ns + post;
      };
      int64_t begin = v.front()->wait_start_ns;
      if (auto prev = steps.find(st - 1); prev != steps.end() && !prev->second.empty())
        begin = end_of(prev->second.back());
      double step_ms = static_cast<double>(end_of(v.back()) - begin) / 1e6;
      f.max_wait_ms = std::max(f.max_wait_ms, wait);
      if (step_ms > f.step_ms) {
        f.step_ms = step_ms;
        f.rank = rank;
        f.comm_ms = comm;
        f.wait_ms = wait;
        f.compute_ms = std::max(0.0, step_ms - comm - wait);
      }
    }
    if (f.step_ms < 0) f.step_ms = 0;
    f.reconfigured_ops = static_cast<int>(reconfigured.size());
    f.reconfigurations = static_cast<int>(reconf[st].size());
    out.push_back(f);
  }
  return out;
}

const std::vector<std::string>& step_csv_columns() {
  static const std::vector<std::string> c = {"mode",
                                             "step",
                                             "warmup",
                                             "rank",
                                             "step_ms",
                                             "compute_ms",
                                             "comm_ms",
                                             "wait_ms",
                                             "max_wait_ms",
                                             "reconfigurations",
                                             "reconfigured_ops",
                                             "rows"};
  return c;
}

std::vector<std::string> step_csv_fields(const StepFigures& f) {
  return {f.mode,
          std::to_string(f.step),
          f.warmup ? "1" : "0",
          std::to_string(f.rank),
          fmt::format("{:.3f}", f.step_ms),
          fmt::format("{:.3f}", f.compute_ms),
          fmt::format("{:.3f}", f.comm_ms),
          fmt::format("{:.3f}", f.wait_ms),
          fmt::format("{:.3f}", f.max_wait_ms),
          std::to_string(f.reconfigurations),
          std::to_string(f.reconfigured_ops),
          std::to_string(f.rows)};
}

void print_step_table(std::ostream& out, const std::vector<StepFigures>& figures) {
  out << fmt::format("{:<13} {:>4} {:>6} {:>4} {:>10} {:>10} {:>10} {:>10} {:>9} {:>5}\n", "mode", "step", "warmup",
                     "rank", "step_ms", "compute_ms", "comm_ms", "wait_ms", "reconfigs", "rows");
  for (const auto& f : figures) {
    out << fmt::format("{:<13} {:>4} {:>6} {:>4} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>9} {:>5}\n", f.mode, f.step,
                       f.warmup ? "yes" : "", f.rank, f.step_ms, f.compute_ms, f.comm_ms, f.wait_ms, f.reconfigurations,
                       f.rows);
  }
  struct Mean {
    double step = 0, wait = 0, reconf = 0;
    int n = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Mean> means;
  for (const auto& f : figures) {
    if (!means.count(f.mode)) order.push_back(f.mode);
    auto& m = means[f.mode];
    if (f.warmup) continue;
    m.step += f.step_ms;
    m.wait += f.wait_ms;
    m.reconf += f.reconfigurations;
    ++m.n;
  }
  out << "# mean over measured steps\n";
  for (const auto& mode : order) {
    const auto& m = means[mode];
    if (m.n == 0) continue;
    out << fmt::format("# {:<13} step {:.2f} ms, fabric wait {:.2f} ms, {:.2f} reconfigurations per step ({} steps)\n",
                       mode, m.step / m.n, m.wait / m.n, m.reconf / m.n, m.n);
  }
  if (means.count("on-demand") && means.count("provisioning") && means["on-demand"].n > 0 &&
      means["provisioning"].n > 0) {
    const auto& a = means["on-demand"];
    const auto& b = means["provisioning"];
    double wa = a.wait / a.n, wb = b.wait / b.n;
    out << fmt::format("# provisioning vs on-demand: fabric wait x{:.2f} ({:+.2f} ms per step), step time x{:.2f}\n",
                       wa > 0 ? wb / wa : 0.0, wb - wa, a.step > 0 ? (b.step / b.n) / (a.step / a.n) : 0.0);
  }
}

// ---------------------------------------------------------------- running

namespace {

// The tidy Sample rows of a rank's timeline-rank<R>.csv or shim-rank<R>.csv.
std::vector<Sample> read_samples(const std::string& path, std::vector<std::string>& problems) {
  std::vector<Sample> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  std::getline(in, line);
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto f = split_csv_line(line);
    if (f.size() < 7) {
      problems.push_back(fmt::format("{}:{}: {} field(s), want 7", path, n, f.size()));
      continue;
    }
    try {
      out.push_back(Sample{std::stoll(f[0]), 0, f[1], f[2], f[3], f[4], std::stod(f[5]), f[6]});
    } catch (const std::exception&) {
      problems.push_back(fmt::format("{}:{}: bad number", path, n));
    }
  }
  return out;
}

void write_events(const std::string& path, const std::vector<phase::ControllerEvent>& events) {
  CsvWriter w(path);
  w.header({"mono_ns", "t_ns", "kind", "rank", "rail", "group", "seq", "stages", "value", "detail"});
  for (const auto& e : events) {
    std::string st;
    for (int s : e.stages) st += (st.empty() ? "" : " ") + std::to_string(s);
    w.row({std::to_string(e.mono_ns), std::to_string(e.real_ns), std::string(phase::to_string(e.kind)),
           std::to_string(e.rank), e.rail, e.group, std::to_string(e.seq), st, fmt::format("{}", e.value), e.detail});
  }
  w.flush();
}

// The line of a failed rank's output that says why: its program's own "<name>: ..." message
// (the usage text may follow it), else the last line.
std::string why_it_failed(const std::string& text, const std::string& program) {
  const std::string prefix = fs::path(program).filename().string() + ":";
  std::istringstream in(text);
  std::string line, last, own;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("ocslab-rank-pid ", 0) == 0) continue;
    last = line;
    if (line.rfind(prefix, 0) == 0) own = line;
  }
  return own.empty() ? last : own;
}

// A host's clock minus the runner's, from `date +%s%N` over SSH: the reading is taken to be
// at the middle of the round trip; the shortest of a few round trips is kept.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = -1;  // half the round trip; -1: not measured
  std::string error;
};

ClockOffset measure_offset(const ocs::SshOptions& ssh) {
  ClockOffset best;
  try {
    ocs::SshSession s(ssh);
    for (int i = 0; i < 5; ++i) {
      int64_t t0 = realtime_ns();
      auto r = s.exec("date +%s%N", std::chrono::seconds(10));
      int64_t t1 = realtime_ns();
      int64_t remote = std::stoll(r.out);
      int64_t half = (t1 - t0) / 2;
      if (best.uncertainty_ns < 0 || half < best.uncertainty_ns) {
        best.uncertainty_ns = half;
        best.offset_ns = remote - (t0 + half);
      }
    }
  } catch (const std::exception& e) {
    best.error = e.what();
    best.uncertainty_ns = -1;
  }
  return best;
}

// One command over a fresh session; a non-zero exit is an error naming the host and command.
std::string must_exec(const HostEntry& h, const std::string& cmd) {
  ocs::SshSession s(ssh_options(h));
  auto r = s.exec(cmd, std::chrono::seconds(60));
  if (r.exit_status != 0)
    throw Error(fmt::format("{}: `{}` failed (status {}): {}", h.name, cmd, r.exit_status, r.err.empty() ? r.out : r.err));
  return r.out;
}

// workload.rxe and workload.pin_neighbours: done on the ranks' hosts before the first mode,
// undone (only what was added) when the run ends however it ends.
class HostPrep {
 public:
  explicit HostPrep(const ExperimentSpec& spec) : spec_(spec) {}
  // Separate from the constructor: what was done before a failure is still undone.
  void prepare(const PhaseWorkloadSpec& pw, const std::function<void(const std::string&)>& log) {
    const ExperimentSpec& spec = spec_;
    std::set<size_t> used;
    for (const auto& r : pw.ranks) used.insert(r.host);
    for (size_t h : used) {
      for (const auto& nic : pw.rxe) {
        // `rdma link` lists "link rxe_x/1 state ACTIVE ... netdev NIC": a NIC that has a device keeps it.
        std::string out = must_exec(spec.hosts[h], fmt::format("if rdma link show | grep -qw 'netdev {0}'; then echo "
                                                               "present; else rdma link add rxe_{0} type rxe netdev {0} "
                                                               "&& echo added; fi",
                                                               nic));
        if (out.find("added") != std::string::npos) {
          undo_.emplace_back(h, fmt::format("rdma link delete rxe_{}", nic));
          log(fmt::format("{}: Soft-RoCE device rxe_{} added on {}", spec.hosts[h].name, nic, nic));
        }
      }
    }
    if (!pw.pin_neighbours) return;
    // Every rank's data NIC: its MAC and IPv4 address, read on its host.
    struct Addr {
      size_t host;
      std::string nic, mac, ip;
    };
    std::vector<Addr> addrs;
    for (const auto& r : pw.ranks) {
      const HostEntry& he = spec.hosts[r.host];
      std::string out = must_exec(he, fmt::format("cat {} && ip -4 -o addr show dev {}",
                                                  shell_quote("/sys/class/net/" + r.nic + "/address"), shell_quote(r.nic)));
      std::istringstream in(out);
      Addr a{r.host, r.nic, "", ""};
      std::getline(in, a.mac);
      std::string line;
      while (a.ip.empty() && std::getline(in, line)) {
        auto at = line.find(" inet ");
        if (at == std::string::npos) continue;
        std::istringstream w(line.substr(at + 6));
        w >> a.ip;
        a.ip = a.ip.substr(0, a.ip.find('/'));
      }
      if (a.mac.empty() || a.ip.empty())
        throw Error(fmt::format("pin_neighbours: {}:{} has no IPv4 address or MAC ({})", he.name, r.nic, out));
      addrs.push_back(a);
    }
    for (const auto& me : addrs) {
      std::string cmd;
      for (const auto& peer : addrs) {
        if (peer.host == me.host && peer.nic == me.nic) continue;
        if (peer.ip == me.ip) continue;
        cmd += fmt::format("{}ip neigh replace {} lladdr {} dev {} nud permanent", cmd.empty() ? "" : " && ", peer.ip,
                           peer.mac, me.nic);
        undo_.emplace_back(me.host, fmt::format("ip neigh del {} dev {}", peer.ip, me.nic));
      }
      if (!cmd.empty()) must_exec(spec.hosts[me.host], cmd);
    }
    log(fmt::format("pinned the neighbours of {} data NIC(s)", addrs.size()));
  }
  ~HostPrep() {
    std::map<size_t, std::string> per_host;
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it)
      per_host[it->first] += it->second + " 2>/dev/null; ";
    for (const auto& [h, cmd] : per_host) {
      try {
        ocs::SshSession s(ssh_options(spec_.hosts[h]));
        s.exec(cmd + "true", std::chrono::seconds(60));
      } catch (const std::exception& e) {
        spdlog::warn("{}: could not undo the host preparation: {}", spec_.hosts[h].name, e.what());
      }
    }
  }
  HostPrep(const HostPrep&) = delete;
  HostPrep& operator=(const HostPrep&) = delete;

 private:
  const ExperimentSpec& spec_;
  std::vector<std::pair<size_t, std::string>> undo_;
};

const char* kRankFiles[] = {"ops-rank{}.csv", "timeline-rank{}.csv", "shim-rank{}.csv", "phase-table-rank{}.csv"};

// One phase mode's run: where its files go, what went wrong, when it ran.
struct ModeRun {
  std::string mode;
  std::string dir;  // <results>/<mode>
  RankLaunch launch;
  std::mutex mu;  // problems, while the ranks' threads run
  std::vector<std::string> problems;
  int64_t started_ns = 0, ended_ns = 0;
  void problem(std::string p) {
    std::lock_guard lock(mu);
    problems.push_back(std::move(p));
  }
};

// The ranks' samples of a mode, from the files they left in its folder, and their op rows.
struct ModeRows {
  std::vector<workloads::OpRecord> rows;
  std::vector<Sample> samples;
};

// The timeline samples of the controller's events (runner clock).
std::vector<Sample> controller_samples(const std::vector<phase::ControllerEvent>& events) {
  std::vector<Sample> out;
  for (const auto& e : events) {
    std::string subject = e.group.empty() ? e.rail : e.group + "#" + std::to_string(e.seq);
    if (e.kind == phase::ControllerEvent::Kind::kReconfigStart || e.kind == phase::ControllerEvent::Kind::kReconfigEnd) {
      subject = e.rail + " " + subject;
    }
    out.push_back(Sample{e.real_ns, 0, e.rank >= 0 ? fmt::format("rank{}", e.rank) : "controller", "controller", subject,
                         std::string(phase::to_string(e.kind)), e.value, ""});
  }
  return out;
}

// One run of the type: the steps of run(), in order, over the state they share.
class PhaseWorkloadRun {
 public:
  PhaseWorkloadRun(Target& target, const RunContext& ctx, RunResult& result)
      : target_(target), spec_(target.spec), pw_(*target.spec.phase_workload), ctx_(ctx), result_(result) {}

  void run() {
    folder_ = fs::absolute(result_.folder).string();
    schedule_text_ = read_file_or_empty(pw_.schedule_path);
    write_text(folder_ + "/schedule.yaml", schedule_text_);
    token_ = random_token();  // this run's controller secret: the ranks get it over SSH
    program_ = install_program();
    slots_ = pw_.slots(spec_.hosts);
    for (const auto& r : pw_.ranks) used_hosts_.insert(r.host);
    measure_offsets();
    std::optional<HostPrep> prep;  // undone when the run ends, however it ends
    if (pw_.pin_neighbours || !pw_.rxe.empty()) prep.emplace(spec_).prepare(pw_, ctx_.logger());
    for (const auto& mode : pw_.modes) {
      if (ctx_.interrupted()) break;
      run_mode(mode);
    }
    result_.interrupted = ctx_.interrupted();
    result_.samples = timeline_rows_;
    write_step_files();
    write_text(folder_ + "/meta.json", meta().dump(2) + "\n");
  }

 private:
  int ranks() const { return pw_.schedule.ranks; }
  const HostEntry& host_of_rank(int r) const { return spec_.hosts[pw_.ranks[static_cast<size_t>(r)].host]; }

  // The program the ranks run: in a virtual lab this build's copy, installed where guests see it.
  std::string install_program() const {
    if (!target_.is_vlab() || pw_.program.find('/') != std::string::npos) return pw_.program;
    return install_binary(exe_dir(ctx_.options().self_exe) + "/" + pw_.program, target_.bin_dir(), pw_.program);
  }

  // Rank samples carry their host's clock: measured once per host, subtracted in the timelines
  // (the step figures only ever subtract times of one rank and do not need it).
  void measure_offsets() {
    if (pw_.launcher != Launcher::kSsh) return;
    for (size_t h : used_hosts_) offsets_[spec_.hosts[h].name] = measure_offset(ssh_options(spec_.hosts[h]));
  }

  // A fresh control plane per mode: the fabric starts from the same initial topology.
  std::shared_ptr<phase::Orchestrator> open_rail(const std::string& mode) const {
    SwitchAccess sw = target_.switch_access();
    auto rail = std::make_shared<phase::Orchestrator>(pw_.rail, slots_, ocs::make_driver(sw.url, sw.options));
    auto placed = rail->add_job(pw_.layout, pw_.initial, slots_);
    ctx_.log(fmt::format("{}: job {} wired as {} on rail {} ({} circuit(s) made, {} removed)", mode, pw_.layout.job,
                         pw_.initial.str(), pw_.rail, placed.added.size(), placed.removed.size()));
    return rail;
  }

  phase::ControllerOptions controller_options(std::shared_ptr<phase::Orchestrator> rail) const {
    phase::ControllerOptions co;
    co.listen_host = pw_.listen_host;
    co.listen_port = pw_.listen_port;
    co.token = token_;
    co.layout = pw_.layout;
    co.rails = {std::move(rail)};
    co.ack_timeout = std::chrono::milliseconds(pw_.ack_timeout_ms);
    co.max_retries = pw_.max_retries;
    return co;
  }

  RankLaunch launch_settings(const std::string& mode, int controller_port) const {
    const HostEntry& host0 = host_of_rank(0);
    RankLaunch l;
    l.program = program_;
    l.controller = fmt::format("{}:{}", pw_.controller_host, controller_port);
    l.job = pw_.layout.job;
    l.mode = mode;
    l.rendezvous = fmt::format("{}:{}", host0.mgmt.empty() ? host0.ssh_host : host0.mgmt, pw_.rendezvous_port);
    return l;
  }

  std::chrono::seconds wait_limit() const { return std::chrono::seconds(pw_.timeout_s + 60); }

  void run_mode(const std::string& mode) {
    ModeRun m;
    m.mode = mode;
    m.dir = folder_ + "/" + mode;
    fs::create_directories(m.dir);
    phase::Controller ctl(controller_options(open_rail(mode)));
    ctl.start();
    m.launch = launch_settings(mode, ctl.port());
    m.started_ns = realtime_ns();
    if (pw_.launcher == Launcher::kSsh) {
      run_over_ssh(m);
    } else {
      run_job_launcher(m);
    }
    m.ended_ns = realtime_ns();
    ctl.stop();
    finish_mode(m, ctl);
  }

  // ---- the ssh launcher: one SSH session per rank, the ranks' files fetched afterwards

  void run_over_ssh(ModeRun& m) {
    const std::map<size_t, std::string> remote = make_remote_dirs(m.mode);
    ctx_.log(fmt::format("{}: starting {} rank(s) over SSH, controller {}", m.mode, ranks(), m.launch.controller));
    // Each rank's pid on its host (its first output line), so Ctrl-C can end exactly it.
    std::vector<std::atomic<long long>> pids(static_cast<size_t>(ranks()));
    std::atomic<int> running{ranks()};
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks(); ++r) {
      threads.emplace_back([&, r] {
        run_rank(m, r, pids[static_cast<size_t>(r)], remote.at(host_index(r)));
        --running;
      });
    }
    while (running > 0) {
      if (ctx_.interrupted()) {
        stop_ranks(pids);
        m.problem(m.mode + ": interrupted: the ranks were stopped");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (auto& t : threads) t.join();
    remove_on_hosts(m, remote, fetch_rank_files(m, remote));
  }

  size_t host_index(int r) const { return pw_.ranks[static_cast<size_t>(r)].host; }

  // A folder per host made by mktemp -d there (a new name, the SSH user's own, mode 0700), with
  // the schedule in it: real hosts need not share a file system.
  std::map<size_t, std::string> make_remote_dirs(const std::string& mode) const {
    const std::string prefix = remote_dir_prefix(result_.run_id, mode);
    std::map<size_t, std::string> dirs;
    for (size_t h : used_hosts_) {
      try {
        ocs::SshSession s(ssh_options(spec_.hosts[h]));
        dirs[h] = make_remote_dir(s, prefix, "schedule.yaml", schedule_text_);
        write_token(s, dirs[h]);
      } catch (const std::exception& e) {
        for (const auto& [made, dir] : dirs) remove_quietly(made, dir);  // only the schedule's copies
        throw Error(fmt::format("{}: cannot make the ranks' folder: {}", spec_.hosts[h].name, e.what()));
      }
    }
    return dirs;
  }

  // The controller's token into the host's (mktemp'd, private) folder: a new 0600 file renamed
  // into place. The token travels on the session's stdin, never in a command line.
  void write_token(ocs::SshSession& s, const std::string& dir) const {
    auto r = s.exec(fmt::format("umask 077 && t=$(mktemp {0}/.controller.token.XXXXXX) && cat > \"$t\" && "
                                "mv -f \"$t\" {0}/controller.token",
                                shell_quote(dir)),
                    std::chrono::seconds(30), token_ + "\n");
    if (r.exit_status != 0) throw Error(fmt::format("cannot write {}/controller.token: {}", dir, r.err));
  }

  // Rank r over its own SSH session until it exits; its output goes to rank<r>.log.
  void run_rank(ModeRun& m, int r, std::atomic<long long>& pid, const std::string& remote) const {
    const HostEntry& h = host_of_rank(r);
    RankLaunch launch = m.launch;
    launch.output_dir = remote;
    launch.schedule = remote + "/schedule.yaml";
    launch.token_file = remote + "/controller.token";
    std::string cmd = shell_join(rank_argv(pw_, spec_.hosts, r, launch));
    std::string text = "$ " + cmd + "\n";
    std::string head;
    try {
      ocs::SshSession s(ssh_options(h));
      auto res = s.exec("echo ocslab-rank-pid $$; exec " + cmd, wait_limit(), {}, [&](std::string_view chunk) {
        if (head.find('\n') != std::string::npos) return;
        head.append(chunk);
        auto nl = head.find('\n');
        if (nl == std::string::npos || head.rfind("ocslab-rank-pid ", 0) != 0) return;
        pid = std::atoll(head.substr(16, nl - 16).c_str());
      });
      text += res.out + res.err + fmt::format("# exit status {}\n", res.exit_status);
      if (res.exit_status != 0) {
        std::string last = why_it_failed(res.err.empty() ? res.out : res.err, m.launch.program);
        m.problem(fmt::format("{}: rank {} on {} {}: {}", m.mode, r, h.name,
                              res.exit_status < 0 ? std::string("was killed by a signal")
                                                  : fmt::format("exited with status {}", res.exit_status),
                              last.empty() ? "(no output)" : last));
      }
    } catch (const std::exception& e) {
      text += std::string("# ") + e.what() + "\n";
      m.problem(fmt::format("{}: rank {} on {}: {}", m.mode, r, h.name, e.what()));
    }
    try {
      write_text(fmt::format("{}/rank{}.log", m.dir, r), text);
    } catch (const std::exception& e) {
      m.problem(fmt::format("{}: rank {}: {}", m.mode, r, e.what()));
    }
  }

  // Ctrl-C: SIGTERM to every rank by its pid, over a session of its own; the rows the ranks
  // wrote before are still fetched.
  void stop_ranks(const std::vector<std::atomic<long long>>& pids) const {
    for (int r = 0; r < ranks(); ++r) {
      long long pid = pids[static_cast<size_t>(r)];
      if (pid <= 0) continue;
      try {
        ocs::SshSession s(ssh_options(host_of_rank(r)));
        s.exec(fmt::format("kill -TERM {} 2>/dev/null; true", pid), std::chrono::seconds(10));
      } catch (const std::exception& e) {
        spdlog::warn("could not stop rank {}: {}", r, e.what());
      }
    }
  }

  // Every rank's files back over SSH, each verified (written, fsynced, its size equal to the
  // host's). Returns the hosts whose folder must stay: a file there was not verified.
  std::set<size_t> fetch_rank_files(ModeRun& m, const std::map<size_t, std::string>& remote) const {
    std::set<size_t> keep;
    for (int r = 0; r < ranks(); ++r) {
      const HostEntry& h = host_of_rank(r);
      std::vector<std::string> names;
      for (const char* pattern : kRankFiles) names.push_back(fmt::format(fmt::runtime(pattern), r));
      try {
        ocs::SshSession s(ssh_options(h));
        auto got = fetch_verified(s, remote.at(host_index(r)), names, m.dir);
        for (const auto& p : got.problems) m.problem(fmt::format("{}: rank {} on {}: {}", m.mode, r, h.name, p));
        if (!got.verified()) keep.insert(host_index(r));
      } catch (const std::exception& e) {
        m.problem(fmt::format("{}: fetching rank {}'s files from {}: {}", m.mode, r, h.name, e.what()));
        keep.insert(host_index(r));
      }
    }
    return keep;
  }

  // Each host's folder is removed once all its files were verified; otherwise it stays, named.
  void remove_on_hosts(ModeRun& m, const std::map<size_t, std::string>& remote, const std::set<size_t>& keep) const {
    for (const auto& [h, dir] : remote) {
      if (keep.count(h)) {
        m.problem(fmt::format("{}: kept {} on {}: not every rank file in it was copied and verified", m.mode, dir,
                              spec_.hosts[h].name));
      } else {
        remove_quietly(h, dir);
      }
    }
  }

  void remove_quietly(size_t h, const std::string& dir) const {
    try {
      ocs::SshSession s(ssh_options(spec_.hosts[h]));
      remove_remote_dir(s, dir);
    } catch (const std::exception& e) {
      spdlog::warn("could not remove {} on {}: {}", dir, spec_.hosts[h].name, e.what());
    }
  }

  // ---- mpirun / srun: one command for the whole job, run here; the launcher reaches the nodes
  // itself and the ranks write into a folder every node shares.

  void run_job_launcher(ModeRun& m) {
    std::string shared = pw_.shared_dir.empty() ? m.dir : pw_.shared_dir + "/" + result_.run_id + "/" + m.mode;
    fs::create_directories(shared);
    m.launch.output_dir = shared;
    m.launch.schedule = pw_.shared_dir.empty() ? folder_ + "/schedule.yaml" : shared + "/schedule.yaml";
    if (!pw_.shared_dir.empty()) write_text(m.launch.schedule, schedule_text_);
    // The ranks read the token from the shared folder: a new 0600 file, removed after the job.
    m.launch.token_file = shared + "/controller.token";
    write_secret_file(m.launch.token_file, token_);
    struct RemoveToken {
      std::string path;
      ~RemoveToken() {
        std::error_code ec;
        fs::remove(path, ec);
      }
    } remove_token{m.launch.token_file};
    auto argv = launcher_argv(pw_, spec_.hosts, m.launch);
    write_text(m.dir + "/launcher.log", "$ " + shell_join(argv) + "\n");
    ctx_.log(fmt::format("{}: {}", m.mode, shell_join(argv)));
    SpawnOptions so;
    so.log_file = m.dir + "/launcher.log";
    int status = wait_for_launcher(m, argv[0], spawn_program(argv, so));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      m.problem(fmt::format("{}: {} exited with status {} (see {}/launcher.log)", m.mode, argv[0], WEXITSTATUS(status),
                            m.dir));
    }
    if (pw_.shared_dir.empty()) return;
    for (int r = 0; r < ranks(); ++r) {
      for (const char* pattern : kRankFiles) {
        std::string name = fmt::format(fmt::runtime(pattern), r);
        std::error_code ec;
        if (fs::exists(shared + "/" + name))
          fs::copy_file(shared + "/" + name, m.dir + "/" + name, fs::copy_options::overwrite_existing, ec);
      }
    }
  }

  // The launcher's wait status; SIGTERM on Ctrl-C or past the ranks' timeout.
  int wait_for_launcher(ModeRun& m, const std::string& program, pid_t pid) const {
    int status = 0;
    auto deadline = std::chrono::steady_clock::now() + wait_limit();
    while (true) {
      if (::waitpid(pid, &status, WNOHANG) == pid) return status;
      if (std::chrono::steady_clock::now() > deadline || ctx_.interrupted()) {
        ::kill(pid, SIGTERM);
        ::waitpid(pid, &status, 0);
        m.problem(fmt::format("{}: {} stopped ({})", m.mode, program, ctx_.interrupted() ? "interrupted" : "timed out"));
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // ---- after a mode: the controller's events, the ranks' rows, figures, the mode's timeline

  void finish_mode(ModeRun& m, const phase::Controller& ctl) {
    auto events = ctl.events();
    for (const auto& p : ctl.problems()) m.problems.push_back(m.mode + ": controller: " + p);
    if (ctl.in_fallback()) m.problems.push_back(m.mode + ": the controller fell back to the giant ring");
    write_events(m.dir + "/controller-events.csv", events);
    ModeRows got = read_rank_files(m);
    auto figures = step_figures(pw_.schedule, m.mode, got.rows, events);
    result_.steps.insert(result_.steps.end(), figures.begin(), figures.end());
    for (auto& smp : got.samples) smp.t_ns -= offset_of(smp.host);
    auto ctl_samples = controller_samples(events);
    got.samples.insert(got.samples.end(), ctl_samples.begin(), ctl_samples.end());
    std::stable_sort(got.samples.begin(), got.samples.end(),
                     [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
    write_mode_timeline(m, got);
    timeline_rows_ += got.samples.size();
    for (const auto& p : m.problems) ctx_.log("problem: " + p);
    result_.problems.insert(result_.problems.end(), m.problems.begin(), m.problems.end());
    int reconfigs = 0;
    for (const auto& f : figures) reconfigs += f.reconfigurations;
    meta_modes_.push_back({{"mode", m.mode},
                           {"controller", m.launch.controller},
                           {"started", m.started_ns},
                           {"finished", m.ended_ns},
                           {"rows", got.rows.size()},
                           {"timeline_rows", got.samples.size()},
                           {"reconfigurations", reconfigs},
                           {"fallback", ctl.in_fallback()},
                           {"problems", m.problems}});
    ctx_.log(fmt::format("{}: {} row(s) from {} rank(s), {} reconfiguration(s) in {:.1f} s", m.mode, got.rows.size(),
                         ranks(), reconfigs, static_cast<double>(m.ended_ns - m.started_ns) / 1e9));
  }

  // A host's clock minus the runner's where it was measured (ssh launcher), else 0.
  int64_t offset_of(const std::string& host) const {
    auto it = offsets_.find(host);
    return it != offsets_.end() && it->second.uncertainty_ns >= 0 ? it->second.offset_ns : 0;
  }

  ModeRows read_rank_files(ModeRun& m) const {
    ModeRows got;
    for (int r = 0; r < ranks(); ++r) {
      std::string ops = fmt::format("{}/ops-rank{}.csv", m.dir, r);
      if (!fs::exists(ops)) {
        m.problems.push_back(fmt::format("{}: rank {} wrote no rows", m.mode, r));
        continue;
      }
      try {
        auto v = workloads::parse_op_csv(read_file_or_empty(ops), ops);
        got.rows.insert(got.rows.end(), v.begin(), v.end());
      } catch (const std::exception& e) {
        m.problems.push_back(e.what());
      }
      for (const char* f : {"timeline-rank{}.csv", "shim-rank{}.csv"}) {
        auto v = read_samples(m.dir + "/" + fmt::format(fmt::runtime(f), r), m.problems);
        got.samples.insert(got.samples.end(), v.begin(), v.end());
      }
    }
    return got;
  }

  // iteration = the step: it starts at the earliest pre hook of its first op on any rank.
  void write_mode_timeline(const ModeRun& m, const ModeRows& got) const {
    std::map<int, int64_t> step_start;
    for (const auto& r : got.rows) {
      int64_t t = r.wait_start_ns - offset_of(r.host);
      auto it = step_start.find(r.step);
      if (it == step_start.end() || t < it->second) step_start[r.step] = t;
    }
    std::vector<int64_t> starts;
    for (const auto& [st, t] : step_start) starts.push_back(t);
    // iteration_of counts from 1 after the first start; steps count from 0.
    write_timeline(m.dir + "/timeline.csv", got.samples, result_.run_id + "/" + m.mode,
                   [&](int64_t t) { return std::max(0, iteration_of(t, starts, 0) - 1); });
  }

  // ---- the run's files

  // The switch as the spec (or the lab) names it.
  std::string switch_text() const { return spec_.switch_url.empty() ? target_.lab.switch_url() : spec_.switch_url; }

  void write_step_files() const {
    CsvWriter w(folder_ + "/phase-steps.csv");
    w.header(step_csv_columns());
    for (const auto& f : result_.steps) w.row(step_csv_fields(f));
    w.flush();
    std::ostringstream table;
    print_step_table(table, result_.steps);
    write_text(folder_ + "/phase-summary.txt", table.str());
  }

  json meta() const {
    json meta;
    meta["run"] = result_.run_id;
    meta["type"] = kPhaseWorkload;
    meta["ocslab_version"] = ctx_.options().version;
    meta["spec"] = {
        {"file", fs::absolute(spec_.origin).string()}, {"name", spec_.name}, {"text", read_file_or_empty(spec_.origin)}};
    meta["workload"] = {{"program", program_},
                        {"schedule", pw_.schedule_path},
                        {"launcher", to_string(pw_.launcher)},
                        {"ranks", json::array()}};
    for (size_t r = 0; r < pw_.ranks.size(); ++r) {
      meta["workload"]["ranks"].push_back({{"rank", r},
                                           {"host", spec_.hosts[pw_.ranks[r].host].name},
                                           {"nic", pw_.ranks[r].nic},
                                           {"slot", fmt::format("{}-{}", slots_[r].ingress, slots_[r].egress)}});
    }
    meta["phase"] = {{"job", pw_.layout.job},          {"pp", pw_.layout.pp}, {"digits", pw_.layout.describe_digits()},
                     {"initial", pw_.initial.str()},   {"rail", pw_.rail},    {"switch", switch_text()},
                     {"allow", spec_.allow.to_string()}};
    meta["modes"] = meta_modes_;
    meta["problems"] = result_.problems;
    meta["clock_offsets"] = json::object();
    for (const auto& [h, o] : offsets_) {
      meta["clock_offsets"][h] = o.uncertainty_ns < 0
                                     ? json{{"error", o.error}}
                                     : json{{"offset_ns", o.offset_ns}, {"uncertainty_ns", o.uncertainty_ns}};
    }
    meta["clocks"] =
        "timeline.csv: rank samples corrected by clock_offsets (ssh launcher); ops-rank and shim-rank files: the host's "
        "own clock";
    return meta;
  }

  Target& target_;
  const ExperimentSpec& spec_;
  const PhaseWorkloadSpec& pw_;
  const RunContext& ctx_;
  RunResult& result_;
  std::string folder_;         // absolute
  std::string schedule_text_;  // the schedule file, as the ranks get it
  std::string token_;          // the controllers' shared secret for this run
  std::string program_;        // as the ranks' hosts see it
  std::vector<phase::Slot> slots_;
  std::set<size_t> used_hosts_;
  std::map<std::string, ClockOffset> offsets_;
  json meta_modes_ = json::array();
  size_t timeline_rows_ = 0;
};

class PhaseWorkload final : public ExperimentType {
 public:
  void run(Target& target, const RunContext& ctx, RunResult& result) override {
    PhaseWorkloadRun(target, ctx, result).run();
  }
};

}  // namespace

std::unique_ptr<ExperimentType> make_phase_workload_experiment() { return std::make_unique<PhaseWorkload>(); }

}  // namespace ocslab::runner
