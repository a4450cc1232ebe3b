// Host-based forwarding across a whole lab, driven by the runner: for one mapping of the spec it
// builds the fabric, computes every host's plan, and fans `ocslab-agent forwarding apply` out to
// all hosts in parallel over SSH (each host its own plan as JSON on stdin). Transactional across
// the lab: when one host fails, the hosts this apply changed are rolled back and the error names
// the host. The verify matrix pings every ordered host pair over the fabric (an RC queue pair
// through the agent's `forwarding ping`) and reads the hops actually taken from the relays' tc
// filter counters before and after. Clears every host at the end (also from the destructor).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ocslab/common/error.h"
#include "ocslab/common/sample.h"
#include "ocslab/forwarding/routes.h"
#include "ocslab/forwarding/rule_plan.h"
#include "ocslab/ocsctl/stream.h"
#include "ocslab/runner/experiment_spec.h"

namespace ocslab::ocs {
class SshSession;
}

namespace ocslab::runner {

// How the runner reaches one host's agent CLI.
struct ForwardingHostAccess {
  std::string name;
  ocs::SshOptions ssh;
  std::string agent = "ocslab-agent";  // path on the host
  std::string mgmt;                    // the host's management address (ping's QP exchange)
};

// One host's apply of one mapping (a timeline row each: source forwarding, signal apply_ms).
struct ForwardingApplyRecord {
  std::string host;
  std::string mapping;
  int iteration = 0;
  int64_t started_ns = 0, finished_ns = 0;  // runner clock
  size_t changes = 0;
  bool ok = false;
  // The host's journal holds this apply (its op id): made changes now, or an earlier attempt
  // over a dropped session did. Such a host is part of a lab-wide rollback even with 0 changes.
  bool journaled = false;
  std::string error;
};

// An apply that failed on a host; the others were rolled back (or say why not in the message).
class ForwardingFailed : public Error {
 public:
  using Error::Error;
};

// One relay's ocslab filter counter, as read before and after a pair's ping.
struct FilterCount {
  std::string host;
  std::string dev;
  std::string dst;  // "10.0.0.30/32"
  uint64_t packets = 0;
};

struct PairResult {
  std::string src, dst;
  std::string src_if, dst_if;  // the client's if1 (first hop's port) and the server's if1
  std::string dst_ip;          // the address the pair uses (Routes::tree_for)
  int expected_hops = 0;       // the plan's path length
  std::vector<std::string> expected_relays;
  bool reachable = false;  // the RC ping got `count` good completions
  long long ok = 0, errors = 0;
  int hops = 0;                     // 1 + relays whose filter for dst_ip counted the ping (0: unreachable)
  std::vector<std::string> relays;  // in path order where expected, others after by name
  double elapsed_ms = 0;
  std::string error;
};

struct VerifyMatrix {
  std::string mapping;
  std::vector<std::string> hosts;
  std::map<std::string, bool> in_sync;  // host -> its installed state equals the plan
  std::vector<PairResult> pairs;        // ordered (src, dst) in host order
  bool all_reachable() const;
  bool hops_as_planned() const;  // every pair reachable over the planned relays
};

// Pure: the relays whose filter for `dst_ip` on any device moved by at least `min_packets`
// between `before` and `after` (a host's counters absent on one side count as 0 there), ordered
// along `expected_relays` first. Filters for other destinations are ignored (the replies).
std::vector<std::string> relays_from_counters(const std::vector<FilterCount>& before,
                                              const std::vector<FilterCount>& after, const std::string& dst_ip,
                                              uint64_t min_packets, const std::vector<std::string>& expected_relays);

// Pure: the pair's addresses and planned path from the routes (hops = Routes::path length).
PairResult plan_pair(const forwarding::Fabric& fabric, const forwarding::Routes& routes, const std::string& src,
                     const std::string& dst);

// Pure: the verify matrix's ordered pairs (source, destination) of `hosts` hosts, as rounds whose
// pairs can run at once: in a round every host is in one pair at most (a source is never also a
// destination, so no pair's replies move the counters another pair is judged by). Greedy in host
// order: 6 rounds for 4 hosts and 30 for 16 (the fewest possible, 2 (n - 1)), 2-3 n for others,
// where the pairs one at a time took n (n - 1) turns.
std::vector<std::vector<std::pair<size_t, size_t>>> verify_rounds(size_t hosts);

// Every host's plan for the mapping, macvlans included for hosts with if2: macvlan.
std::vector<forwarding::HostPlan> lab_plans(const ExperimentSpec& spec, const Mapping& mapping);
// The same for routes computed on any fabric of the spec's hosts (the survivors of a dark
// circuit, the bridge of make-before-break).
std::vector<forwarding::HostPlan> lab_plans(const ExperimentSpec& spec, const forwarding::Fabric& fabric,
                                            const forwarding::Routes& routes);

// The command line of `ocslab-agent forwarding ARGV...` on a host: `agent` as the spec gives it
// (a command prefix such as `sudo -n /usr/bin/ocslab-agent`, the host's own shell words), then
// every word of argv quoted (shell_join): the one path by which LabForwarding builds remote
// commands, so no NIC name, address or folder from a spec is ever read by the shell as syntax.
std::string agent_forwarding_command(const std::string& agent, const std::vector<std::string>& argv);
// The argv of one side of a pair's ping: `ping --if NIC --listen|--connect MGMT:PORT
// --secret-file - --count N --timeout-s S` (the server listens, the client connects).
std::vector<std::string> ping_argv(const std::string& nic, bool listen, const std::string& mgmt, int port, int count,
                                   int timeout_s);

std::string format_matrix(const VerifyMatrix& m);  // the printed table
void write_matrix_csv(const VerifyMatrix& m, const std::string& path);
nlohmann::json to_json(const VerifyMatrix& m);

class LabForwarding {
 public:
  using Log = std::function<void(const std::string&)>;
  LabForwarding(const ExperimentSpec& spec, std::vector<ForwardingHostAccess> hosts, Log log);
  ~LabForwarding();  // clear() when something was applied and not cleared yet
  LabForwarding(const LabForwarding&) = delete;
  LabForwarding& operator=(const LabForwarding&) = delete;

  // Applies the mapping's plans on every host in parallel (each host changes only its diff).
  // Throws ForwardingFailed naming the failed host(s); the other hosts' changes of this call
  // were rolled back. The records are also kept for samples().
  std::vector<ForwardingApplyRecord> apply(const Mapping& mapping, int iteration);
  // `forwarding clear` on every host in parallel; returns one error per failed host.
  std::vector<std::string> clear();
  VerifyMatrix verify(const Mapping& mapping);
  // Applies routes computed on `fabric` (any subset of a mapping's circuits) under `label` (the
  // records' mapping); what apply(mapping) does after building the mapping's routes.
  std::vector<ForwardingApplyRecord> apply_routes(const std::string& label, const forwarding::Fabric& fabric,
                                                  const forwarding::Routes& routes, int iteration);
  // The verify matrix of what is installed now (the last apply's fabric and routes), as `label`:
  // pairs those routes cannot join are unreachable without a ping.
  VerifyMatrix verify_installed(const std::string& label);

  // What the hosts hold since the last successful apply: its fabric and routes.
  struct Installed {
    std::string label;
    forwarding::Fabric fabric;
    forwarding::Routes routes;
  };
  const Installed& installed() const { return installed_; }

  // apply_ms and changes rows of every apply so far (runner clock, host = the host).
  std::vector<Sample> samples() const;
  const std::vector<ForwardingApplyRecord>& records() const { return records_; }
  const ExperimentSpec& spec() const { return spec_; }
  // Leave what was applied in place (no clear from the destructor): `ocslab forwarding apply`.
  void keep() { dirty_ = false; }
  const Log& log() const { return log_; }

 private:
  // Runs an agent forwarding command on host i over its SSH connection (opened once, reused).
  struct Exec {
    int status = -1;
    std::string out, err;
  };
  Exec run(size_t i, const std::vector<std::string>& argv, const std::string& input = {});
  std::vector<FilterCount> read_counters(const std::vector<forwarding::HostPlan>& plans,
                                         std::map<std::string, bool>* in_sync);
  // One pair's ping (server on host d, client on host s, on `port`): fills in p's reachability,
  // not its hops. p comes planned (plan_pair).
  void ping_pair(PairResult& p, size_t s, size_t d, int port, const std::string& secret);
  VerifyMatrix verify_routes(const std::string& label, const forwarding::Fabric& fabric,
                             const forwarding::Routes& routes);

  const ExperimentSpec& spec_;
  std::vector<ForwardingHostAccess> hosts_;
  Log log_;
  std::vector<std::unique_ptr<ocs::SshSession>> ssh_;
  std::vector<ForwardingApplyRecord> records_;
  Installed installed_;
  bool dirty_ = false;  // something applied since the last clear
  int next_port_ = 0;
};

// The runner's hooks (run_experiment calls only these). forwarding_start: null when the spec
// has no forwarding section; else applies the first mapping on every host (throws
// ForwardingFailed) and, with verify: true/every, writes the matrix into the results folder.
std::unique_ptr<LabForwarding> forwarding_start(const ExperimentSpec& spec, const std::vector<ocs::SshOptions>& ssh,
                                                const std::string& folder, const LabForwarding::Log& log);
// After reconfiguration `iteration` to `mapping`: re-applies (the diff only); verify: every
// writes another matrix. Throws ForwardingFailed (the other hosts rolled back).
void forwarding_reconfigured(LabForwarding& fwd, const Mapping& mapping, int iteration, const std::string& folder);
// The host access of a spec (agent path and management address from its hosts).
std::vector<ForwardingHostAccess> forwarding_access(const ExperimentSpec& spec,
                                                    const std::vector<ocs::SshOptions>& ssh);
// verify-<iteration>-<mapping>.{txt,csv,json} in folder (iteration 0: the first mapping).
void write_matrix_files(const VerifyMatrix& m, const std::string& folder, int iteration);

}  // namespace ocslab::runner
