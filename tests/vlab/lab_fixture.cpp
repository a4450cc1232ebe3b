#include "lab_fixture.h"

#include <signal.h>

#include <fmt/format.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "ocslab/common/csv_reader.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/switch_url.h"
#include "ocslab/testing/processes.h"
#include "ocslab/testing/source_dir.h"
#include "ocslab/testing/sshd_fixture.h"
#include "ocslab/vlab/lab_control.h"
#include "ocslab/vlab/lab_spec.h"
#include "ocslab/vlab/lab_timing.h"

namespace vlab_test {

namespace {

// What both guest scripts start with.
const std::string kGuestPrelude = R"SH(
export LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin
# This script's session (the 6th field of /proc/PID/stat): its own processes are never state.
read -r _ _ _ _ _ me _ < /proc/$$/stat
# The net sysctls a case may change, as `sysctl` prints them ("key = value"), read from /proc/sys
# directly: a fraction of what `sysctl -a` costs under TCG.
net_sysctls() {
  (cd /proc/sys && grep -r . net/ipv4/ip_forward net/ipv4/conf net/ipv6/conf/*/forwarding \
    net/ipv6/conf/*/disable_ipv6 2>/dev/null) | sed 's|/|.|g; s|:| = |'
}
# The files a case may leave: the entries of /tmp, /run, /var/lib and /var/spool, and everything
# below the folders ocslab writes to (they may already exist on this machine's root, which the
# guests see under their overlay, so their contents count, not just their names).
file_entries() {
  for d in /tmp /run /var/lib /var/spool; do
    for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
      if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\n' "$f"; fi
    done
  done
  find /var/spool/ocslab-agent /var/lib/ocslab /run/ocslab-agent -mindepth 1 2>/dev/null
}
# Each line of stdin, prefixed by $1 and a space (shell builtins: no process).
tag() { while IFS= read -r l; do printf '%s %s\n' "$1" "$l"; done; }
# The processes that are state, as "PID ARGS": not kernel threads, not sshd's per-connection
# processes (they end with their client), not this script's session.
processes() {
  ps -eo sess=,ppid=,pid=,args= |
    awk -v me="$me" '$1 != me && $2 != 2 && $3 != 2 {pid = $3; $1 = $2 = $3 = ""; sub(/^ +/, ""); sub(/[[:space:]]+$/, "");
                                                     if ($0 !~ /^sshd: /) print pid " " $0}'
}
)SH";

// A guest's state, one sorted line per fact, tagged by kind (the shell function `snapshot`, which
// the reset script runs too). What it leaves out on purpose: routes of the local table (they
// follow the addresses), kernel IPv6 routes, neighbours that are not permanent (learnt again by
// ARP), kernel threads, sshd's per-connection processes (they end with their client) and the
// session running the script. Every process costs about 0.12 s in a TCG guest, so the script
// filters and tags with shell builtins (read, printf, case) and runs 18 programs where it ran 45:
// 3.2 s instead of 5.5 s per snapshot, the same lines.
const std::string kSnapshotFunction = R"SH(
snapshot() {
{
ip -br link show | while read -r a b c d _; do printf 'L %s %s %s %s\n' "$a" "$b" "$c" "$d"; done
set -f
ip -br addr show | while read -r n _ rest; do for a in $rest; do printf 'A %s %s\n' "$n" "$a"; done; done
set +f
ip -4 route show table all | while IFS= read -r l; do
  case $l in *" table local"*) ;; *) printf 'R4 %s\n' "$l" ;; esac; done
ip -6 route show table all | while IFS= read -r l; do
  case $l in *" table local"* | *"proto kernel"*) ;; *) printf 'R6 %s\n' "$l" ;; esac; done
ip rule show | tag U4
ip -6 rule show | tag U6
ip neigh show nud permanent | tag N4
ip -6 neigh show nud permanent | tag N6
tc qdisc show | tag Q
ip netns list | tag NS
rdma link show 2>/dev/null | tag RD
net_sysctls | tag S
processes | while read -r _ args; do printf 'P %s\n' "$args"; done
file_entries | tag F
} | sed 's/[[:space:]]*$//' | sort
}
)SH";

const std::string kSnapshotScript = kGuestPrelude + kSnapshotFunction + "snapshot\n";

// Checks a guest against the baseline in /dev/shm/ocslab-test-baseline (the snapshot's lines,
// written by a here-document in front of this script) and, when it differs, puts it back and
// waits until it matches, all in one run of the script: a guest the last case did not touch costs
// one snapshot; a dirty one its snapshot, the reset and the snapshots until it is clean (one or two),
// with no round trip to this machine in between. Whatever is not in the baseline goes
// (processes, namespaces, links, qdiscs, addresses, routes, rules, neighbours, Soft-RoCE links,
// files), what the baseline has and is missing comes back (addresses, links up, Soft-RoCE links,
// sysctl values). One awk compares the snapshot (taken again only when stray processes had to
// be killed) with the baseline and plans every command; the kernel's share runs as two `ip
// -batch` and one `tc -batch`: about 30 programs per dirty guest where a loop per link, address
// and route ran about 110 (every program costs about 0.1 s in a TCG guest).
// What it prints for Lab::reset, one line each: "OCSLAB-RESET untouched", or "OCSLAB-RESET
// applied UPTIME" and then "OCSLAB-RESET clean POLLS UPTIME" or "OCSLAB-RESET dirty POLLS
// UPTIME"; the first differing poll's snapshot between "OCSLAB-RESET first" and "OCSLAB-RESET
// end", and the last one of a guest that stays dirty between "OCSLAB-RESET last" and
// "OCSLAB-RESET end". UPTIME is the guest's /proc/uptime, from "OCSLAB-RESET start UPTIME".
const std::string kResetScript = kGuestPrelude + kSnapshotFunction + R"SH(
B=/dev/shm/ocslab-test-baseline
NOW=/dev/shm/ocslab-test-now
uptime_s() { read -r up _ < /proc/uptime; printf '%s' "$up"; }
finish() { rm -f "$B" "$NOW"; exit 0; }
echo "OCSLAB-RESET start $(uptime_s)"
snapshot > "$NOW"
if cmp -s "$B" "$NOW"; then echo "OCSLAB-RESET untouched"; finish; fi
# Processes the baseline does not have, until none is left (three rounds at most: a killed
# process may still be listed while it exits).
killed=
for round in 1 2 3; do
  pids=$(processes | awk 'NR == FNR { if (substr($0, 1, 2) == "P ") keep[substr($0, 3)] = 1; next }
                          $1 != 1 { pid = $1; sub(/^[0-9]+ /, ""); if (!($0 in keep)) print pid }' "$B" -)
  [ -n "$pids" ] || break
  kill -9 $pids 2>/dev/null
  killed=1
done
[ -n "$killed" ] && snapshot > "$NOW"
# The plan, one command per line, tagged by what runs it. The management NIC (eth0: how this very
# session reaches the guest) is the lab's: its addresses, routes and qdiscs are never touched.
plan=$(awk '
  function dev(name) { sub(/@.*/, "", name); return name }
  function field_after(key,   i) { for (i = 2; i < NF; i++) if ($i == key) return $(i + 1); return "" }
  NR == FNR {
    base[$0] = 1
    if ($1 == "L") { n = dev($2); blink[n] = 1; if ($5 ~ /[<,]UP[,>]/) bup[n] = 1 }
    if ($1 == "A") { n = dev($2); baddr[n " " $3] = 1; if (n != "eth0" && $3 !~ /:/) want_addr[n " " $3] = 1 }
    if ($1 == "RD") { d = $3; sub(/\/.*/, "", d); brd[d] = field_after("netdev") }
    if ($1 == "S") { k = $2; v = $0; sub(/^S [^ ]+ = /, "", v); bsys[k] = v }
    next
  }
  { rest = $0; sub(/^[^ ]+ /, "", rest) }
  $1 == "L" { n = dev($2)
              if (!(n in blink)) print "IP4 link del " n
              else if ((n in bup) && $5 !~ /[<,]UP[,>]/) up[n] = 1
              next }
  $1 == "A" { n = dev($2); have_addr[n " " $3] = 1
              if ((n in blink) && n != "eth0" && !((n " " $3) in baddr)) print "IP4 addr del " $3 " dev " n
              next }
  $1 == "RD" { d = $3; sub(/\/.*/, "", d); crd[d] = 1; if (!(d in brd)) print "RDEL " d; next }
  $0 in base { next }
  $1 == "Q" && ($3 == "clsact" || $3 == "ingress") { d = field_after("dev"); if (d != "eth0") print "TC qdisc del dev " d " " $3; next }
  $1 == "R4" && rest !~ / dev eth0( |$)/ { print "IP4 route del " rest; next }
  $1 == "R6" && rest !~ / dev eth0( |$)/ { print "IP6 route del " rest; next }
  $1 == "U4" { sub(/:.*/, "", rest); print "IP4 rule del pref " rest; next }
  $1 == "U6" { sub(/:.*/, "", rest); print "IP6 rule del pref " rest; next }
  $1 == "N4" { sub(/ lladdr.*/, "", rest); print "IP4 neigh del " rest; next }
  $1 == "N6" { sub(/ lladdr.*/, "", rest); print "IP6 neigh del " rest; next }
  $1 == "NS" { netns = 1; next }
  $1 == "S" { k = $2; v = rest; sub(/^[^ ]+ = /, "", v); if ((k in bsys) && bsys[k] != v) sys[k] = bsys[k]; next }
  $1 == "F" { if (rest == "/run/netns") umount_netns = 1; files[rest] = 1; next }
  END {
    if (netns || umount_netns) print "NETNS"
    # `ip netns add` leaves /run/netns a mount point of its own: unmounted, it can go below.
    if (umount_netns) print "UMOUNT /run/netns"
    for (n in up) print "IP4 link set " n " up"
    for (a in want_addr) if (!(a in have_addr)) { split(a, parts, " "); print "IP4 addr add " parts[2] " dev " parts[1] }
    print "IP4 neigh flush all"
    # ip_forward first: writing it resets the forwarding of every interface, set by the lines after.
    # As paths below /proc/sys (a dot of the key is a folder).
    if ("net.ipv4.ip_forward" in sys) print "SYS net/ipv4/ip_forward " sys["net.ipv4.ip_forward"]
    for (k in sys) if (k != "net.ipv4.ip_forward") { p = k; gsub(/\./, "/", p); print "SYS " p " " sys[k] }
    for (d in brd) if (!(d in crd)) print "RADD " d " " brd[d]
    for (f in files) print "RM " f
  }' "$B" "$NOW")
# Namespaces first (their veths take their peers here with them), then the kernel batches, then
# what needs the links back (Soft-RoCE), then files. Shell builtins sort the plan.
netns= umount= ip4= ip6= tcb= late= rm_list=
nl='
'
while read -r kind rest; do
  case $kind in
  NETNS) netns=1 ;;
  UMOUNT) umount=$rest ;;
  IP4) ip4="$ip4$rest$nl" ;;
  IP6) ip6="$ip6$rest$nl" ;;
  TC) tcb="$tcb$rest$nl" ;;
  SYS | RDEL | RADD) late="$late$kind $rest$nl" ;;
  RM) rm_list="$rm_list$rest$nl" ;;
  esac
done <<EOF_PLAN
$plan
EOF_PLAN
[ -n "$netns" ] && ip -all netns delete 2>/dev/null
[ -n "$umount" ] && umount "$umount" 2>/dev/null
[ -n "$ip4" ] && printf '%s' "$ip4" | ip -force -batch - >/dev/null 2>&1
[ -n "$ip6" ] && printf '%s' "$ip6" | ip -6 -force -batch - >/dev/null 2>&1
[ -n "$tcb" ] && printf '%s' "$tcb" | tc -force -batch - >/dev/null 2>&1
while read -r kind a b; do
  case $kind in
  SYS) printf '%s\n' "$b" > "/proc/sys/$a" 2>/dev/null ;;
  RDEL) rdma link delete "$a" 2>/dev/null ;;
  RADD) rdma link add "$a" type rxe netdev "$b" 2>/dev/null ;;
  esac
done <<EOF_LATE
$late
EOF_LATE
[ -n "$rm_list" ] && printf '%s' "$rm_list" | xargs -r -d '\n' rm -rf --
echo "OCSLAB-RESET applied $(uptime_s)"
# Links, Soft-RoCE ports and killed processes take a moment: the snapshot until it matches, for
# up to 60 s (the firmware delay of the slowest NIC model included).
read -r up _ < /proc/uptime
deadline=$((${up%.*} + 60))
polls=0
while :; do
  snapshot > "$NOW"
  polls=$((polls + 1))
  if cmp -s "$B" "$NOW"; then echo "OCSLAB-RESET clean $polls $(uptime_s)"; finish; fi
  if [ "$polls" -eq 1 ]; then echo "OCSLAB-RESET first"; cat "$NOW"; echo "OCSLAB-RESET end"; fi
  read -r up _ < /proc/uptime
  if [ "${up%.*}" -ge "$deadline" ]; then
    echo "OCSLAB-RESET dirty $polls $(uptime_s)"
    echo "OCSLAB-RESET last"; cat "$NOW"; echo "OCSLAB-RESET end"
    finish
  fi
done
)SH";

// Lines only in want ("-") and only in got ("+"), for a message.
std::string diff_lines(const std::string& want, const std::string& got) {
  auto lines = [](const std::string& t) {
    std::multiset<std::string> out;
    std::stringstream in(t);
    for (std::string l; std::getline(in, l);) {
      if (!l.empty()) out.insert(l);
    }
    return out;
  };
  auto w = lines(want), g = lines(got);
  std::string d;
  for (const auto& l : w) {
    if (w.count(l) > g.count(l)) d += "  - " + l + "\n";
  }
  for (const auto& l : g) {
    if (g.count(l) > w.count(l)) d += "  + " + l + "\n";
  }
  return d;
}

// What one run of kResetScript reported (its "OCSLAB-RESET" lines).
struct ResetReport {
  bool untouched = false;
  bool clean = false;
  int polls = 0;
  double applied_s = 0;  // the guest's seconds from the script's start to the reset applied
  std::string first;     // the first poll's snapshot, when it still differed
  std::string last;      // the last snapshot of a guest that stayed dirty
};

ResetReport parse_reset_report(const std::string& out) {
  ResetReport rep;
  std::stringstream in(out);
  double start = 0;
  std::string* section = nullptr;
  const std::string tag = "OCSLAB-RESET ";
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(tag, 0) != 0) {
      if (section) *section += l + "\n";
      continue;
    }
    std::stringstream f(l.substr(tag.size()));
    std::string word;
    f >> word;
    double at = 0;
    if (word == "start") {
      f >> start;
    } else if (word == "untouched") {
      rep.untouched = true;
    } else if (word == "applied") {
      f >> at;
      rep.applied_s = at - start;
    } else if (word == "clean" || word == "dirty") {
      rep.clean = word == "clean";
      f >> rep.polls;
    } else if (word == "first") {
      section = &rep.first;
    } else if (word == "last") {
      section = &rep.last;
    } else if (word == "end") {
      section = nullptr;
    }
  }
  return rep;
}

std::string baseline_file(const vlab::LabState& s, const std::string& host) {
  return s.dir + "/test-baseline/" + host + ".txt";
}

// fn(host, its index in s.hosts) on every host at once; exceptions come back as "host: what".
std::vector<std::string> on_every_host(const vlab::LabState& s,
                                       const std::function<std::string(const std::string&, size_t)>& fn) {
  std::vector<std::string> out(s.hosts.size());
  std::vector<std::thread> th;
  for (size_t i = 0; i < s.hosts.size(); ++i) {
    th.emplace_back([&, i] {
      try {
        out[i] = fn(s.hosts[i].name, i);
      } catch (const std::exception& e) {
        out[i] = "error: " + s.hosts[i].name + ": " + e.what();
      }
    });
  }
  for (auto& t : th) t.join();
  return out;
}

// The timing a lab booted from spec has (what `ocslab vlab timing` shows before any change).
vlab::TimingState lab_file_timing(const vlab::LabSpec& spec) {
  emu::EmulatorConfig cfg = spec.emulator;
  cfg.nics.clear();
  for (const auto& h : spec.hosts) {
    for (const auto& n : h.nics) {
      emu::NicConfig nc;
      nc.link = n.link;
      nc.link_preset = n.link_preset;
      cfg.nics.push_back(nc);
    }
  }
  return vlab::initial_timing(cfg);
}

// The switch's and the NICs' timing and the link rate alike (holds and dark ports aside).
bool same_timing(const vlab::TimingState& a, const vlab::TimingState& b) {
  return a.switch_preset == b.switch_preset && a.switching.to_string() == b.switching.to_string() &&
         a.nic_model == b.nic_model && a.los_ms == b.los_ms && a.firmware_up.to_string() == b.firmware_up.to_string() &&
         a.rapid_window_ms == b.rapid_window_ms && a.rapid_extra.to_string() == b.rapid_extra.to_string() &&
         a.link_gbps == b.link_gbps;
}

// A distribution in the lab file's YAML syntax (the timing channel's input).
std::string distribution_yaml(const emu::Distribution& d) {
  switch (d.kind) {
    case emu::Distribution::Kind::kUniform:
      return fmt::format("{{uniform: [{}, {}]}}", d.a_ms, d.b_ms);
    case emu::Distribution::Kind::kNormal:
      return fmt::format("{{normal: {{mean: {}, sd: {}, floor: {}}}}}", d.a_ms, d.b_ms, d.floor_ms);
    case emu::Distribution::Kind::kFixed:
      break;
  }
  return fmt::format("{}", d.a_ms);
}

// The timing-channel options that give a running lab timing t: the presets by name (a NIC
// preset brings its rapid re-link window), their numbers as t has them. A lab whose NICs have
// different models ("mixed") cannot be given one by this channel: its NIC model is left.
vlab::LabTiming timing_options(const vlab::TimingState& t) {
  vlab::LabTiming o;
  if (t.switch_preset != "custom" && !t.switch_preset.empty()) o.switch_preset = t.switch_preset;
  o.switching_ms = distribution_yaml(t.switching);
  o.link_gbps = fmt::format("{}", t.link_gbps);
  if (t.nic_model == "mixed" || t.nic_model.empty()) return o;
  if (t.nic_model != "custom") o.nic_model = t.nic_model;
  o.los_ms = fmt::format("{}", t.los_ms);
  o.firmware_up_ms = distribution_yaml(t.firmware_up);
  return o;
}

void merge_timing(vlab::LabTiming& into, const vlab::LabTiming& from) {
  into.switch_preset = from.switch_preset;
  into.switching_ms = from.switching_ms;
  into.nic_model = from.nic_model;
  into.los_ms = from.los_ms;
  into.firmware_up_ms = from.firmware_up_ms;
  into.link_gbps = from.link_gbps;
}

}  // namespace

std::vector<std::string> processes_of(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& p : testing::processes_matching(dir)) {
    found.push_back(std::to_string(p.pid) + ": " + p.args_text().substr(0, 120));
  }
  return found;
}

void require_nothing_left(const std::string& dir) {
  std::vector<std::string> left;
  for (int i = 0; i < 50; ++i) {
    left = processes_of(dir);
    if (left.empty()) break;
    // `vlab down` has returned: what is left is exiting; 5 s in 100 ms polls.
    // load-safe: the poll interval of a bounded wait for the lab's processes to exit.
    std::this_thread::sleep_for(100ms);
  }
  INFO("still running: " << (left.empty() ? "" : left.front()));
  CHECK(left.empty());
  CHECK_FALSE(fs::exists(dir));
}

std::string source_path(const std::string& rel) { return testing::source_dir() + "/" + rel; }

std::string test_tool_path(const std::string& name) {
  if (const char* d = std::getenv("OCSLAB_TEST_BIN_DIR"); d && *d) return std::string(d) + "/" + name;
  std::string ocslab = testing::bin_path("ocslab");
  return ocslab.substr(0, ocslab.rfind("/bin/")) + "/tests/" + name;
}

ProgramResult ocslab_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {testing::bin_path("ocslab")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program_status(argv);
}

Lab::Lab(const std::string& lab_file, std::chrono::milliseconds command_timeout, Sharing sharing)
    : command_timeout_(command_timeout), sharing_(sharing) {
  vlab::LabSpec spec = vlab::load_lab_spec(source_path(lab_file));
  name_ = spec.name;
  file_timing_ = lab_file_timing(spec);
  initial_circuits_ = spec.initial_circuits();
  std::sort(initial_circuits_.begin(), initial_circuits_.end());
  if (sharing_ == Sharing::kShared && healthy_running(lab_file)) {
    auto t0 = std::chrono::steady_clock::now();
    refresh_if_rebuilt();
    if (first_since_boot()) return;
    std::string left = reset();
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left.empty()) {
      std::cout << "shared lab " << name_ << ": reset and checked clean in " << took << " s\n";
      up_ = true;
      return;
    }
    // A case left something the reset could not undo: the next case gets a freshly booted lab.
    std::cout << "shared lab " << name_ << " is not clean after " << took << " s of reset; rebooting it:\n" << left;
  }
  boot(lab_file);
  if (sharing_ == Sharing::kShared) {
    take_baseline();
    std::ofstream marker(fresh_marker());  // its time is the baseline's
  }
}

// The baseline is what the guests showed, twice in a row, at the end of their boot: the first
// case after it (ctest runs the fixture's up entry and then, RUN_SERIAL, one case) finds them as
// the baseline has them, so checking them again would cost a snapshot per guest (8 to 10 s with
// four guests on two cores) to learn nothing. Only within kFreshFor of the baseline, and once.
bool Lab::first_since_boot() {
  constexpr auto kFreshFor = std::chrono::seconds(120);
  std::error_code ec;
  const auto written = fs::last_write_time(fresh_marker(), ec);
  if (ec) return false;
  fs::remove(fresh_marker(), ec);
  const auto age = fs::file_time_type::clock::now() - written;
  if (age > kFreshFor) return false;
  std::cout << "shared lab " << name_ << ": the first case since its boot, "
            << std::chrono::duration<double>(age).count() << " s after its baseline: nothing to reset\n";
  up_ = true;
  return true;
}

std::string Lab::fresh_marker() const { return state_.dir + "/test-baseline/fresh"; }

// The guests cache this machine's files (9p cache=loose, docs/virtual-lab.md): a shared lab
// booted before the last build would run the old binaries by their build paths (the agent, the
// test tools). When a binary is newer than the lab (or its last refresh), every guest drops its
// caches once. A fresh CI run builds first and boots after: nothing to do there.
void Lab::refresh_if_rebuilt() {
  std::error_code ec;
  const std::string marker = state_.dir + "/caches-dropped";
  auto since = fs::last_write_time(state_.dir + "/state.json", ec);
  if (ec) return;
  if (auto m = fs::last_write_time(marker, ec); !ec && m > since) since = m;
  bool newer = false;
  for (const std::string& dir : {fs::path(testing::bin_path("ocslab")).parent_path().string(),
                                 fs::path(test_tool_path("x")).parent_path().string()}) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::error_code e2;
      if (e.is_regular_file(e2) && e.last_write_time(e2) > since) newer = true;
    }
  }
  if (!newer) return;
  for (const auto& h : state_.hosts) {
    auto r = exec(h.name, "sync; echo 3 > /proc/sys/vm/drop_caches", command_timeout_);
    if (r.exit_status != 0) std::cout << "shared lab " << name_ << ": " << h.name << " kept its caches: " << r.err;
  }
  std::ofstream(marker) << "binaries newer than the lab: guest caches dropped\n";
  std::cout << "shared lab " << name_ << ": rebuilt binaries since it booted; the guests' caches were dropped\n";
}

bool Lab::healthy_running(const std::string& lab_file) {
  for (const auto& l : vlab::list_labs(vlab::default_cache_dir())) {
    if (l.name != name_) continue;
    vlab::LabState s = vlab::lab_status(l.dir);
    bool alive = s.phase == "running" && s.supervisor_pid > 0 && ::kill(s.supervisor_pid, 0) == 0 &&
                 std::all_of(s.hosts.begin(), s.hosts.end(), [](const auto& h) { return h.alive; });
    std::error_code ec;
    bool same_file = fs::weakly_canonical(s.spec, ec) == fs::weakly_canonical(source_path(lab_file), ec);
    bool baselined = std::all_of(s.hosts.begin(), s.hosts.end(),
                                 [&](const auto& h) { return fs::exists(baseline_file(s, h.name)); });
    if (alive && same_file && baselined) {
      state_ = s;
      return true;
    }
    std::cout << "shared lab " << name_ << " is up but "
              << (!alive       ? "not healthy"
                  : !same_file ? "from another file"
                               : "has no baseline")
              << "; booting it again\n";
  }
  return false;
}

void Lab::boot(const std::string& lab_file) {
  // A lab left behind by an aborted earlier run (or a shared one that is not clean) would block `up`.
  if (fs::exists(vlab::labs_dir(vlab::default_cache_dir()) + "/" + name_)) ocslab_cli({"vlab", "down", name_});
  auto t0 = std::chrono::steady_clock::now();
  ProgramResult r = ocslab_cli({"vlab", "up", source_path(lab_file), "--timeout", "400"});
  std::cout << r.out << r.err;
  std::cout << "lab up in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  REQUIRE(r.status == 0);
  up_ = true;
  REQUIRE_THAT(r.out + r.err, Catch::Matchers::Contains("host(s) ready in"));
  state_ = {};
  for (const auto& l : vlab::list_labs(vlab::default_cache_dir())) {
    if (l.name == name_) state_ = l;
  }
  REQUIRE_FALSE(state_.dir.empty());
}

void Lab::take_baseline() {
  // Two snapshots in a row must agree: a guest still settling (a link coming up, a process of
  // its start-up still running) would make a baseline no reset could meet.
  fs::create_directories(state_.dir + "/test-baseline");
  auto errors = on_every_host(state_, [&](const std::string& host, size_t) -> std::string {
    std::string a = snapshot(host), b;
    for (int i = 0; i < 20; ++i) {
      b = snapshot(host);
      if (a == b) break;
      a = b;
    }
    if (a != b) return host + ": the guest does not settle:\n" + diff_lines(a, b);
    std::ofstream(baseline_file(state_, host)) << a;
    return "";
  });
  for (const auto& e : errors) {
    INFO(e);
    REQUIRE(e.empty());
  }
}

std::string Lab::reset() {
  // The switch first: links that come back need the firmware delay, which the guest work hides.
  auto driver = switch_driver();
  driver->apply(initial_circuits_, ocs::ApplyMode::kReplace);
  auto circuits = driver->list();
  std::sort(circuits.begin(), circuits.end());
  std::string left;
  if (circuits != initial_circuits_) left += "  switch: the lab file's circuits could not be restored\n";
  // NICs a case held down and ports it darkened (fault injection) and did not release: released
  // and lit, so their links come back with the circuits (the guests' snapshots below wait for them).
  // A switching time or NIC model a case set (Lab::retime): the lab file's again.
  try {
    const vlab::TimingState now = vlab::lab_timing(state_.dir);
    vlab::LabTiming put_back;
    if (!now.held_down.empty() || !now.dark_ports.empty()) {
      put_back.hold_down = std::vector<std::string>{};
      put_back.dark_ports = std::vector<int>{};
    }
    if (!same_timing(now, file_timing_)) merge_timing(put_back, timing_options(file_timing_));
    if (!put_back.empty()) {
      const vlab::TimingState after = vlab::set_lab_timing(state_.dir, put_back, 10s);
      if (!same_timing(after, file_timing_)) {
        left += "  emulator: the lab file's timing (" + file_timing_.summary() +
                ") could not be restored: " + after.summary() + "\n";
      }
    }
  } catch (const std::exception& e) {
    left += std::string("  emulator: the lab file's timing, holds and dark ports could not be restored: ") + e.what() +
            "\n";
  }
  // Each host's line of the timing report: what its reset cost and, when polls were needed, what
  // the first poll still found different (the report says where a reset's seconds go).
  std::vector<std::string> timing(state_.hosts.size());
  auto results = on_every_host(state_, [&](const std::string& host, size_t index) -> std::string {
    auto t0 = std::chrono::steady_clock::now();
    const std::string base = baseline(host);
    // The baseline travels in the command (a here-document), not on stdin, which the session
    // does not close. One run of the script checks, resets and waits (kResetScript).
    ocs::ExecResult r = ocs::SshSession(ssh(host)).exec(
        "cat > /dev/shm/ocslab-test-baseline <<'OCSLAB_BASELINE_END'\n" + base + "OCSLAB_BASELINE_END\n" + kResetScript,
        command_timeout_ + 60s);
    const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.exit_status != 0)
      return "  " + host + ": reset script exited " + std::to_string(r.exit_status) + ": " + r.err + "\n";
    const ResetReport rep = parse_reset_report(r.out);
    std::string& line = timing[index];
    if (rep.untouched) {
      line = fmt::format("{} untouched ({:.1f} s)", host, total_s);
      return "";
    }
    line = fmt::format("{} reset (script done at {:.1f} s", host, rep.applied_s);
    if (!rep.clean) {
      line += fmt::format(", still dirty at {:.1f} s after {} snapshot(s))", total_s, rep.polls);
      return "  " + host + " differs from its baseline:\n" + diff_lines(base, rep.last);
    }
    line += fmt::format(", clean at {:.1f} s after {} snapshot(s))", total_s, rep.polls);
    if (!rep.first.empty()) line += "; the first still showed:\n" + diff_lines(base, rep.first).substr(0, 600);
    return "";
  });
  for (const auto& t : timing) {
    if (!t.empty()) std::cout << "  reset " << name_ << ": " << t << "\n";
  }
  for (const auto& r : results) left += r;
  return left;
}

vlab::TimingState Lab::retime(const vlab::LabTiming& t) const {
  vlab::TimingState now = vlab::set_lab_timing(state_.dir, t, 10s);
  std::cout << "lab " << name_ << " retimed: " << now.summary() << "\n";
  INFO(now.summary());
  REQUIRE(now.error.empty());
  return now;
}

std::unique_ptr<ocs::OcsDriver> Lab::switch_driver() const {
  ocs::DriverOptions o;
  o.password = state_.switch_password;
  return ocs::make_driver(ocs::SwitchUrl::parse(state_.switch_url()), o);
}

std::string Lab::snapshot(const std::string& host) const {
  ocs::ExecResult r = exec(host, kSnapshotScript);
  if (r.exit_status != 0) throw std::runtime_error(host + ": snapshot failed: " + r.err);
  return r.out;
}

std::vector<std::map<std::string, std::string>> read_csv_rows(const std::string& path) {
  std::ifstream in(path);
  INFO(path);
  REQUIRE(in);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    auto f = split_csv_line(line);
    REQUIRE(f.size() == header.size());
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < f.size(); ++i) row[header[i]] = f[i];
    rows.push_back(row);
  }
  return rows;
}

std::string Lab::baseline(const std::string& host) const { return read_file_or_empty(baseline_file(state_, host)); }

Lab::~Lab() {
  if (up_ && sharing_ == Sharing::kOwn) ocslab_cli({"vlab", "down", name_});
}

void Lab::down() {
  ProgramResult r = ocslab_cli({"vlab", "down", name_});
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  up_ = false;
}

ocs::SshOptions Lab::ssh(const std::string& host) const {
  ocs::SshOptions o;
  o.host = "127.0.0.1";
  o.port = state_.host(host).ssh_port;
  o.user = "root";
  o.identity_file = state_.client_key();
  o.known_hosts_file = state_.known_hosts();
  return o;
}

ocs::ExecResult Lab::exec(const std::string& host, const std::string& cmd, std::chrono::milliseconds timeout) const {
  ocs::SshSession s(ssh(host));
  return s.exec(cmd, timeout.count() > 0 ? timeout : command_timeout_);
}

int Lab::switch_acks_since(int64_t since_ns, const std::string& command) const {
  std::ifstream gt(state_.ground_truth());
  int n = 0;
  for (std::string line; std::getline(gt, line);) {
    const auto f = split_csv_line(line);
    // t_ns,host,source,subject,signal,...: the emulator's TL1 server acknowledging a command.
    if (f.size() < 5 || f[2] != "tl1" || f[3] != command || f[4] != "ack") continue;
    if (std::stoll(f[0]) >= since_ns) ++n;
  }
  return n;
}

std::string Lab::run(const std::string& host, const std::string& cmd, std::chrono::milliseconds timeout) const {
  ocs::ExecResult r = exec(host, cmd, timeout);
  INFO(host << "$ " << cmd << "\n" << r.out << r.err);
  REQUIRE(r.exit_status == 0);
  return r.out;
}

}  // namespace vlab_test
