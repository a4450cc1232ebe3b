// Running a phase-workload experiment: per phase mode, the embedded controller + orchestrator
// over the spec's switch, the ranks (SSH or one mpirun / srun command), their files fetched,
// the per-step figures and the merged timeline.
#include "ocslab/common/file.h"
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
#include "ocslab/common/process.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/ssh_session.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/phase/orchestrator.h"
#include "ocslab/runner/experiment_spec.h"
#include "ocslab/runner/runner.h"
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

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw Error("cannot write " + path);
}

ocs::SshOptions ssh_of(const HostEntry& h) {
  ocs::SshOptions o;
  o.host = h.ssh_host;
  o.port = h.ssh_port;
  o.user = h.user;
  o.identity_file = h.identity_file;
  o.known_hosts_file = h.known_hosts;
  return o;
}

std::string exe_dir(const std::string& self) {
  std::error_code ec;
  auto p = fs::read_symlink(self.empty() ? "/proc/self/exe" : self, ec);
  if (ec) p = self.empty() ? fs::path("/proc/self/exe") : fs::path(self);
  return p.parent_path().string();
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
  ocs::SshSession s(ssh_of(h));
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
      std::string out = must_exec(he, fmt::format("cat /sys/class/net/{0}/address && ip -4 -o addr show dev {0}", r.nic));
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
        ocs::SshSession s(ssh_of(spec_.hosts[h]));
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

}  // namespace

void run_phase_workload(const ExperimentSpec& spec, const RunOptions& opt, const std::string& switch_url,
                        const std::string& switch_password, const std::string& lab_bin_dir, RunResult& result) {
  const PhaseWorkloadSpec& pw = *spec.phase_workload;
  auto log = [&](const std::string& msg) {
    spdlog::info("{}", msg);
    if (opt.log) *opt.log << "ocslab run: " << msg << "\n" << std::flush;
  };
  auto interrupted = [&] { return opt.interrupted && opt.interrupted->load(); };
  const std::string folder = fs::absolute(result.folder).string();
  const std::string schedule_text = read_file_or_empty(pw.schedule_path);
  write_file(folder + "/schedule.yaml", schedule_text);

  // The program the ranks run: in a virtual lab this build's copy, installed where guests see it.
  std::string program = pw.program;
  if (!lab_bin_dir.empty() && program.find('/') == std::string::npos) {
    std::string src = exe_dir(opt.self_exe) + "/" + program;
    if (!fs::exists(src)) throw Error(fmt::format("cannot find {} next to ocslab ({}): build it first", program, src));
    fs::create_directories(lab_bin_dir);
    std::string tmp = lab_bin_dir + "/" + program + ".new." + std::to_string(getpid());
    fs::copy_file(src, tmp, fs::copy_options::overwrite_existing);
    fs::rename(tmp, lab_bin_dir + "/" + program);
    program = lab_bin_dir + "/" + program;
  }
  const auto slots = pw.slots(spec.hosts);
  const int n = pw.schedule.ranks;
  const HostEntry& host0 = spec.hosts[pw.ranks.front().host];
  std::set<size_t> used_hosts;
  for (const auto& r : pw.ranks) used_hosts.insert(r.host);

  // Rank samples carry their host's clock: measured once per host, subtracted in the timelines
  // (the step figures only ever subtract times of one rank and do not need it).
  std::map<std::string, ClockOffset> offsets;
  if (pw.launcher == Launcher::kSsh) {
    for (size_t h : used_hosts) offsets[spec.hosts[h].name] = measure_offset(ssh_of(spec.hosts[h]));
  }
  std::optional<HostPrep> prep;
  if (pw.pin_neighbours || !pw.rxe.empty()) prep.emplace(spec).prepare(pw, log);
  json meta_modes = json::array();
  size_t timeline_rows = 0;
  for (const auto& mode : pw.modes) {
    if (interrupted()) break;
    const std::string dir = folder + "/" + mode;
    fs::create_directories(dir);
    // A fresh control plane per mode: the fabric starts from the same initial topology.
    ocs::DriverOptions dopt;
    dopt.allow = spec.allow;
    dopt.identity_file = spec.switch_identity_file;
    dopt.known_hosts_file = spec.switch_known_hosts;
    if (!switch_password.empty()) dopt.password = switch_password;
    auto rail = std::make_shared<phase::Orchestrator>(pw.rail, slots,
                                                      ocs::make_driver(ocs::SwitchUrl::parse(switch_url), dopt));
    auto placed = rail->add_job(pw.layout, pw.initial, slots);
    log(fmt::format("{}: job {} wired as {} on rail {} ({} circuit(s) made, {} removed)", mode, pw.layout.job,
                    pw.initial.str(), pw.rail, placed.added.size(), placed.removed.size()));
    phase::ControllerOptions co;
    co.listen_host = pw.listen_host;
    co.listen_port = pw.listen_port;
    co.layout = pw.layout;
    co.rails = {rail};
    co.ack_timeout = std::chrono::milliseconds(pw.ack_timeout_ms);
    co.max_retries = pw.max_retries;
    phase::Controller ctl(co);
    ctl.start();
    RankLaunch l;
    l.program = program;
    l.controller = fmt::format("{}:{}", pw.controller_host, ctl.port());
    l.job = pw.layout.job;
    l.mode = mode;
    l.rendezvous = fmt::format("{}:{}", host0.mgmt.empty() ? host0.ssh_host : host0.mgmt, pw.rendezvous_port);
    const auto wait_limit = std::chrono::seconds(pw.timeout_s + 60);
    std::vector<std::string> mode_problems;
    const int64_t started_ns = realtime_ns();

    if (pw.launcher == Launcher::kSsh) {
      const std::string remote = fmt::format("/tmp/ocslab-phase-{}-{}", result.run_id, mode);
      l.schedule = remote + "/schedule.yaml";
      l.output_dir = remote;
      // The schedule goes to every host over SSH: real hosts need not share a file system.
      for (size_t h : used_hosts) {
        ocs::SshSession s(ssh_of(spec.hosts[h]));
        auto r = s.exec(fmt::format("mkdir -p {0} && cat > {0}/schedule.yaml", remote), std::chrono::seconds(30),
                        schedule_text);
        if (r.exit_status != 0)
          throw Error(fmt::format("{}: cannot write {}/schedule.yaml: {}", spec.hosts[h].name, remote, r.err));
      }
      log(fmt::format("{}: starting {} rank(s) over SSH, controller {}", mode, n, l.controller));
      std::vector<std::thread> threads;
      std::mutex mu;
      // Each rank's pid on its host (its first output line), so Ctrl-C can end exactly it.
      std::vector<long long> pids(static_cast<size_t>(n), 0);
      std::atomic<int> running{n};
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
          const HostEntry& h = spec.hosts[pw.ranks[static_cast<size_t>(r)].host];
          std::string cmd = shell_join(rank_argv(pw, spec.hosts, r, l));
          std::string text = "$ " + cmd + "\n";
          std::string head;
          try {
            ocs::SshSession s(ssh_of(h));
            auto res = s.exec("echo ocslab-rank-pid $$; exec " + cmd, wait_limit, {}, [&](std::string_view chunk) {
              if (head.find('\n') != std::string::npos) return;
              head.append(chunk);
              auto nl = head.find('\n');
              if (nl == std::string::npos || head.rfind("ocslab-rank-pid ", 0) != 0) return;
              std::lock_guard lock(mu);
              pids[static_cast<size_t>(r)] = std::atoll(head.substr(16, nl - 16).c_str());
            });
            text += res.out + res.err + fmt::format("# exit status {}\n", res.exit_status);
            if (res.exit_status != 0) {
              std::string last = why_it_failed(res.err.empty() ? res.out : res.err, l.program);
              std::lock_guard lock(mu);
              mode_problems.push_back(fmt::format("{}: rank {} on {} {}: {}", mode, r, h.name,
                                                  res.exit_status < 0
                                                      ? std::string("was killed by a signal")
                                                      : fmt::format("exited with status {}", res.exit_status),
                                                  last.empty() ? "(no output)" : last));
            }
          } catch (const std::exception& e) {
            text += std::string("# ") + e.what() + "\n";
            std::lock_guard lock(mu);
            mode_problems.push_back(fmt::format("{}: rank {} on {}: {}", mode, r, h.name, e.what()));
          }
          write_file(fmt::format("{}/rank{}.log", dir, r), text);
          --running;
        });
      }
      // Ctrl-C: SIGTERM to every rank by its pid, over a session of its own; the rows the ranks
      // wrote before are still fetched.
      while (running > 0) {
        if (interrupted()) {
          for (int r = 0; r < n; ++r) {
            long long pid = 0;
            {
              std::lock_guard lock(mu);
              pid = pids[static_cast<size_t>(r)];
            }
            if (pid <= 0) continue;
            try {
              ocs::SshSession s(ssh_of(spec.hosts[pw.ranks[static_cast<size_t>(r)].host]));
              s.exec(fmt::format("kill -TERM {} 2>/dev/null; true", pid), std::chrono::seconds(10));
            } catch (const std::exception& e) {
              spdlog::warn("could not stop rank {}: {}", r, e.what());
            }
          }
          std::lock_guard lock(mu);
          mode_problems.push_back(mode + ": interrupted: the ranks were stopped");
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      for (auto& t : threads) t.join();
      // Every rank's files back over SSH, then the remote folder goes.
      for (int r = 0; r < n; ++r) {
        const HostEntry& h = spec.hosts[pw.ranks[static_cast<size_t>(r)].host];
        try {
          ocs::SshSession s(ssh_of(h));
          for (const char* pattern : kRankFiles) {
            std::string name = fmt::format(fmt::runtime(pattern), r);
            auto res = s.exec(fmt::format("cat {}/{}", remote, name), std::chrono::seconds(60));
            if (res.exit_status == 0) write_file(dir + "/" + name, res.out);
          }
        } catch (const std::exception& e) {
          mode_problems.push_back(fmt::format("{}: fetching rank {}'s files from {}: {}", mode, r, h.name, e.what()));
        }
      }
      for (size_t h : used_hosts) {
        try {
          ocs::SshSession s(ssh_of(spec.hosts[h]));
          s.exec("rm -rf " + remote, std::chrono::seconds(30));
        } catch (const std::exception& e) {
          spdlog::warn("could not remove {} on {}: {}", remote, spec.hosts[h].name, e.what());
        }
      }
    } else {
      // One command for the whole job, run here: the launcher reaches the nodes itself and the
      // ranks write into a folder every node shares.
      std::string shared = pw.shared_dir.empty() ? dir : pw.shared_dir + "/" + result.run_id + "/" + mode;
      fs::create_directories(shared);
      l.output_dir = shared;
      l.schedule = pw.shared_dir.empty() ? folder + "/schedule.yaml" : shared + "/schedule.yaml";
      if (!pw.shared_dir.empty()) write_file(l.schedule, schedule_text);
      auto argv = launcher_argv(pw, spec.hosts, l);
      write_file(dir + "/launcher.log", "$ " + shell_join(argv) + "\n");
      log(fmt::format("{}: {}", mode, shell_join(argv)));
      SpawnOptions so;
      so.log_file = dir + "/launcher.log";
      pid_t pid = spawn_program(argv, so);
      int status = 0;
      auto deadline = std::chrono::steady_clock::now() + wait_limit;
      bool done = false;
      while (!done) {
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) {
          done = true;
        } else if (std::chrono::steady_clock::now() > deadline || interrupted()) {
          ::kill(pid, SIGTERM);
          ::waitpid(pid, &status, 0);
          mode_problems.push_back(
              fmt::format("{}: {} stopped ({})", mode, argv[0], interrupted() ? "interrupted" : "timed out"));
          done = true;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        mode_problems.push_back(
            fmt::format("{}: {} exited with status {} (see {}/launcher.log)", mode, argv[0], WEXITSTATUS(status), dir));
      }
      if (!pw.shared_dir.empty()) {
        for (int r = 0; r < n; ++r) {
          for (const char* pattern : kRankFiles) {
            std::string name = fmt::format(fmt::runtime(pattern), r);
            std::error_code ec;
            if (fs::exists(shared + "/" + name))
              fs::copy_file(shared + "/" + name, dir + "/" + name, fs::copy_options::overwrite_existing, ec);
          }
        }
      }
    }
    const int64_t ended_ns = realtime_ns();
    ctl.stop();
    auto events = ctl.events();
    for (const auto& p : ctl.problems()) mode_problems.push_back(mode + ": controller: " + p);
    if (ctl.in_fallback()) mode_problems.push_back(mode + ": the controller fell back to the giant ring");
    write_events(dir + "/controller-events.csv", events);

    // Rows of every rank.
    std::vector<workloads::OpRecord> rows;
    std::vector<Sample> samples;
    for (int r = 0; r < n; ++r) {
      std::string ops = fmt::format("{}/ops-rank{}.csv", dir, r);
      if (!fs::exists(ops)) {
        mode_problems.push_back(fmt::format("{}: rank {} wrote no rows", mode, r));
        continue;
      }
      try {
        auto v = workloads::parse_op_csv(read_file_or_empty(ops), ops);
        rows.insert(rows.end(), v.begin(), v.end());
      } catch (const std::exception& e) {
        mode_problems.push_back(e.what());
      }
      for (const char* f : {"timeline-rank{}.csv", "shim-rank{}.csv"}) {
        auto v = read_samples(dir + "/" + fmt::format(fmt::runtime(f), r), mode_problems);
        samples.insert(samples.end(), v.begin(), v.end());
      }
    }
    auto figures = step_figures(pw.schedule, mode, rows, events);
    result.steps.insert(result.steps.end(), figures.begin(), figures.end());

    for (auto& smp : samples) {
      auto it = offsets.find(smp.host);
      if (it != offsets.end() && it->second.uncertainty_ns >= 0) smp.t_ns -= it->second.offset_ns;
    }
    // The controller's side joins the ranks' samples in the mode's timeline (runner clock).
    for (const auto& e : events) {
      std::string subject = e.group.empty() ? e.rail : e.group + "#" + std::to_string(e.seq);
      if (e.kind == phase::ControllerEvent::Kind::kReconfigStart ||
          e.kind == phase::ControllerEvent::Kind::kReconfigEnd) {
        subject = e.rail + " " + subject;
      }
      samples.push_back(Sample{e.real_ns, 0, e.rank >= 0 ? fmt::format("rank{}", e.rank) : "controller", "controller",
                               subject, std::string(phase::to_string(e.kind)), e.value, ""});
    }
    std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
    // iteration = the step: it starts at the earliest pre hook of its first op on any rank.
    std::map<int, int64_t> step_start;
    for (const auto& r : rows) {
      int64_t t = r.wait_start_ns;
      if (auto it = offsets.find(r.host); it != offsets.end() && it->second.uncertainty_ns >= 0)
        t -= it->second.offset_ns;
      auto it = step_start.find(r.step);
      if (it == step_start.end() || t < it->second) step_start[r.step] = t;
    }
    std::vector<int64_t> starts;
    for (const auto& [st, t] : step_start) starts.push_back(t);
    {
      CsvWriter w(dir + "/timeline.csv");
      auto cols = sample_csv_columns();
      cols.push_back("run");
      cols.push_back("iteration");
      w.header(cols);
      for (const auto& s : samples) {
        auto f = sample_csv_fields(s);
        f.push_back(result.run_id + "/" + mode);
        // iteration_of counts from 1 after the first start; steps count from 0.
        f.push_back(std::to_string(std::max(0, iteration_of(s.t_ns, starts, 0) - 1)));
        w.row(f);
      }
      w.flush();
    }
    timeline_rows += samples.size();
    for (const auto& p : mode_problems) log("problem: " + p);
    result.problems.insert(result.problems.end(), mode_problems.begin(), mode_problems.end());
    int reconfigs = 0;
    for (const auto& f : figures) reconfigs += f.reconfigurations;
    meta_modes.push_back({{"mode", mode},
                          {"controller", l.controller},
                          {"started", started_ns},
                          {"finished", ended_ns},
                          {"rows", rows.size()},
                          {"timeline_rows", samples.size()},
                          {"reconfigurations", reconfigs},
                          {"fallback", ctl.in_fallback()},
                          {"problems", mode_problems}});
    log(fmt::format("{}: {} row(s) from {} rank(s), {} reconfiguration(s) in {:.1f} s", mode, rows.size(), n, reconfigs,
                    static_cast<double>(ended_ns - started_ns) / 1e9));
  }
  result.interrupted = interrupted();
  result.samples = timeline_rows;

  {
    CsvWriter w(folder + "/phase-steps.csv");
    w.header(step_csv_columns());
    for (const auto& f : result.steps) w.row(step_csv_fields(f));
    w.flush();
    std::ostringstream table;
    print_step_table(table, result.steps);
    write_file(folder + "/phase-summary.txt", table.str());
  }
  json meta;
  meta["run"] = result.run_id;
  meta["type"] = kPhaseWorkload;
  meta["ocslab_version"] = opt.version;
  meta["spec"] = {
      {"file", fs::absolute(spec.origin).string()}, {"name", spec.name}, {"text", read_file_or_empty(spec.origin)}};
  meta["workload"] = {{"program", program},
                      {"schedule", pw.schedule_path},
                      {"launcher", to_string(pw.launcher)},
                      {"ranks", json::array()}};
  for (size_t r = 0; r < pw.ranks.size(); ++r) {
    meta["workload"]["ranks"].push_back({{"rank", r},
                                         {"host", spec.hosts[pw.ranks[r].host].name},
                                         {"nic", pw.ranks[r].nic},
                                         {"slot", fmt::format("{}-{}", slots[r].ingress, slots[r].egress)}});
  }
  meta["phase"] = {{"job", pw.layout.job},           {"pp", pw.layout.pp}, {"digits", pw.layout.describe_digits()},
                   {"initial", pw.initial.str()},    {"rail", pw.rail},    {"switch", switch_url},
                   {"allow", spec.allow.to_string()}};
  meta["modes"] = meta_modes;
  meta["problems"] = result.problems;
  meta["clock_offsets"] = json::object();
  for (const auto& [h, o] : offsets) {
    meta["clock_offsets"][h] = o.uncertainty_ns < 0
                                   ? json{{"error", o.error}}
                                   : json{{"offset_ns", o.offset_ns}, {"uncertainty_ns", o.uncertainty_ns}};
  }
  meta["clocks"] =
      "timeline.csv: rank samples corrected by clock_offsets (ssh launcher); ops-rank and shim-rank files: the host's "
      "own clock";
  write_file(folder + "/meta.json", meta.dump(2) + "\n");
}

}  // namespace ocslab::runner
