#include "ocslab/forwarding/apply.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "ocslab/common/durable_file.h"
#include "ocslab/common/file.h"
#include "ocslab/common/safe_fs.h"
#include "ocslab/forwarding/if2_link.h"
#include "ocslab/forwarding/route_netlink.h"
#include "ocslab/forwarding/tc_netlink.h"

namespace fs = std::filesystem;

namespace ocslab::forwarding {

namespace {

// Far above any lab's journal (a few KiB per host); a bound on what is read as root.
constexpr size_t kMaxJournalBytes = 64 << 20;

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }

// SIGINT/SIGTERM only set a flag while an operation runs: the engine stops between batches
// and restores; a second signal does not cut the restore short.
class SignalGuard {
 public:
  SignalGuard() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

class Interrupted : public Error {
 public:
  using Error::Error;
};

void check_signal() {
  if (int s = g_signal) throw Interrupted(fmt::format("interrupted by {}", s == SIGINT ? "SIGINT" : "SIGTERM"));
}

// One operation at a time per state directory. The directory is checked first: this runs as
// root and its journal decides what a rollback deletes, so it must be root's (the running
// user's) and writable by nobody else; the lock is never opened through a symlink.
class DirLock {
 public:
  explicit DirLock(const std::string& dir) {
    try {
      ensure_own_dir(dir, DirPolicy::kOwned);
    } catch (const Error& e) {
      throw Error(std::string("forwarding state directory: ") + e.what());
    }
    fd_ = open_no_follow(dir + "/lock", O_RDWR | O_CREAT, 0600, "forwarding lock");
    std::string path = dir + "/lock";
    if (::flock(fd_, LOCK_EX | LOCK_NB) < 0) {
      int e = errno;
      ::close(fd_);
      if (e == EWOULDBLOCK) throw Error("another ocslab forwarding operation holds " + path);
      throw SystemError("cannot lock " + path, e);
    }
  }
  ~DirLock() { ::close(fd_); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw SystemError("cannot open " + path + " to sync it", errno);
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc < 0) throw SystemError("fsync " + path, e);
}

// Written to a new temporary file (O_EXCL|O_NOFOLLOW, a unique name), synced, renamed over the
// journal and the directory synced: a crash leaves either the old or the new journal, never a
// torn one, and nothing is written through a symlink planted at a predictable name.
void write_journal(const std::string& dir, const Journal& j) {
  write_file_atomic(dir + "/journal.json", [&](DurableFile& f) { f.append(to_json(j).dump(1) + "\n"); });
}

void remove_journal(const std::string& dir) {
  std::string path = dir + "/journal.json";
  if (::unlink(path.c_str()) < 0 && errno != ENOENT) throw SystemError("cannot remove " + path, errno);
  fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

using NeighKey = std::pair<std::string, std::string>;  // (dst, dev)

// What the journal names: neighbour keys, macvlans and clsact devices ocslab made, and the
// devices its filters were on. Only these (and the plan's own filter devices) are looked at.
struct Known {
  std::set<NeighKey> neighbours;
  std::map<std::string, LinkRule> links;  // by name
  std::set<std::string> qdisc_devs;
  std::set<std::string> filter_devs;
  void add(const HostPlan& p) {
    for (const auto& n : p.neighbours) neighbours.insert({n.dst, n.dev});
    for (const auto& l : p.links) links.emplace(l.name, l);
    for (const auto& q : p.qdiscs) qdisc_devs.insert(q.dev);
    for (const auto& f : p.filters) filter_devs.insert(f.dev);
  }
};

struct KernelState {
  HostPlan owned;
  std::vector<KernelRoute> routes;          // the whole main table
  std::vector<KernelNeighbour> neighbours;  // every IPv4 entry
  std::set<std::string> clsact_devs;        // looked-at devices that hold a clsact (any owner)
  std::set<std::string> devices;            // every link of the namespace
};

// The relay side's sockets, opened only when a plan or the journal has relay state: a host that
// relays nothing never touches tc (kernels without flower keep working for source-only hosts).
struct Sockets {
  RouteNetlink nl;
  std::optional<TcNetlink> tc_;
  std::optional<If2Links> links_;
  TcNetlink& tc() {
    if (!tc_) tc_.emplace();
    return *tc_;
  }
  If2Links& links() {
    if (!links_) links_.emplace();
    return *links_;
  }
};

// Owned routes: main table, protocol kRouteProtocol. Owned neighbours: permanent IPv4 entries
// whose (dst, dev) is the destination and device of an owned /32 route, or is named in the
// journal, which covers a neighbour added just before a kill -9 stopped its route. Owned
// macvlans and clsacts: named in the journal (ocslab created them) and still there (a macvlan
// of the same parent). Owned filters: list_owned (the tag) on the clsact devices looked at.
KernelState read_kernel(Sockets& s, const std::string& host, const Known& known, const HostPlan& desired) {
  KernelState k;
  k.owned.host = host;
  k.routes = s.nl.list_routes();
  k.neighbours = s.nl.list_neighbours();
  std::set<NeighKey> extra = known.neighbours;
  for (const auto& r : k.routes) {
    if (r.rule.protocol != kRouteProtocol) continue;
    k.owned.routes.push_back(r.rule);
    if (r.prefix_len == 32) extra.insert({r.rule.dst.substr(0, r.rule.dst.find('/')), r.rule.dev});
  }
  for (const auto& n : k.neighbours)
    if (n.permanent() && extra.count({n.rule.dst, n.rule.dev})) k.owned.neighbours.push_back(n.rule);

  bool relay = !known.links.empty() || !known.qdisc_devs.empty() || !known.filter_devs.empty() ||
               !desired.links.empty() || !desired.qdiscs.empty() || !desired.filters.empty();
  if (!relay) return k;
  std::map<std::string, int> index = s.tc().link_indexes();
  for (const auto& [name, i] : index) k.devices.insert(name);
  for (const auto& [name, l] : known.links) {
    auto st = s.links().get(name);
    auto parent = index.find(l.parent);
    if (st && st->kind == "macvlan" && parent != index.end() && st->parent == parent->second)
      k.owned.links.push_back({name, l.parent, st->mac});
  }
  std::set<std::string> look = known.qdisc_devs;
  look.insert(known.filter_devs.begin(), known.filter_devs.end());
  for (const auto& q : desired.qdiscs) look.insert(q.dev);
  for (const auto& f : desired.filters) look.insert(f.dev);
  for (const auto& dev : look) {
    if (!index.count(dev) || !s.tc().has_clsact(dev)) continue;
    k.clsact_devs.insert(dev);
    if (known.qdisc_devs.count(dev)) k.owned.qdiscs.push_back({dev});
    for (auto& f : s.tc().list_owned(dev)) k.owned.filters.push_back(std::move(f.rule));
  }
  return k;
}

// Runs kernel changes in pipelined chunks, checking for signals between chunks.
class Executor {
 public:
  Executor(RouteNetlink& nl, size_t chunk, size_t pause_after, bool interruptible)
      : nl_(nl), chunk_(chunk == 0 ? 1 : chunk), pause_after_(pause_after), interruptible_(interruptible) {}

  template <class Request>
  void run(const std::vector<Request>& requests) {
    size_t i = 0;
    while (i < requests.size()) {
      size_t n = std::min(chunk_, requests.size() - i);
      if (pause_after_ > done_) n = std::min(n, pause_after_ - done_);
      nl_.apply(
          std::vector<Request>(requests.begin() + static_cast<long>(i), requests.begin() + static_cast<long>(i + n)));
      i += n;
      done_ += n;
      if (pause_after_ && done_ == pause_after_) pause();
      if (interruptible_) check_signal();
    }
  }
  // One change made outside RouteNetlink (tc, links): counted like the others.
  void count(size_t n) {
    size_t before = done_;
    done_ += n;
    if (pause_after_ && before < pause_after_ && done_ >= pause_after_) pause();
    if (interruptible_) check_signal();
  }
  size_t done() const { return done_; }

 private:
  void pause() {
    std::fprintf(stderr, "ocslab forwarding: test hook: paused after %zu changes\n", done_);
    std::fflush(stderr);
    auto until = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (!g_signal && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  RouteNetlink& nl_;
  size_t chunk_;
  size_t pause_after_;
  bool interruptible_;
  size_t done_ = 0;
};

// --- one step per kind, in apply order -------------------------------------------------------

void link_step(Sockets& s, Executor& ex, const PlanDiff& d, bool removals) {
  for (const auto& c : d.links) {
    if ((c.op == ChangeOp::remove) != removals) continue;
    MacvlanSpec spec{c.rule.name, c.rule.parent, c.rule.mac};
    if (removals)
      s.links().delete_macvlan(spec);
    else
      s.links().ensure_macvlan(spec);
    ex.count(1);
  }
}

void qdisc_step(Sockets& s, Executor& ex, const PlanDiff& d, bool removals) {
  for (const auto& c : d.qdiscs) {
    if ((c.op == ChangeOp::remove) != removals) continue;
    if (removals)
      s.tc().delete_clsact(c.rule.dev);
    else
      s.tc().add_clsact(c.rule.dev);
    ex.count(1);
  }
}

// Adds and replaces: a changed filter is deleted and added again (tc cannot change a flower
// filter's actions in place). Each TcNetlink call is all-or-nothing.
void filter_step(Sockets& s, Executor& ex, const PlanDiff& d, bool removals, const std::set<std::string>& devices) {
  std::vector<FilterRule> del, add;
  for (const auto& c : d.filters) {
    if (removals) {
      // A filter on a device that is gone went with it (nothing to delete).
      if (c.op == ChangeOp::remove && devices.count(c.rule.dev)) del.push_back(c.rule);
      continue;
    }
    if (c.op == ChangeOp::replace) del.push_back(c.old);
    if (c.op != ChangeOp::remove) add.push_back(c.rule);
  }
  if (!del.empty()) s.tc().delete_filters(del);
  if (!add.empty()) s.tc().add_filters(add);
  ex.count(removals ? del.size() : add.size());
}

void neighbour_step(Executor& ex, const PlanDiff& d, bool removals, const std::set<NeighKey>& present) {
  std::vector<NeighbourRequest> q;
  for (const auto& c : d.neighbours) {
    if ((c.op == ChangeOp::remove) != removals) continue;
    ChangeOp op = c.op;
    // A non-permanent (learned) entry for the key is a cache entry: overwrite it.
    if (op == ChangeOp::add && present.count({c.rule.dst, c.rule.dev})) op = ChangeOp::replace;
    q.push_back({op, c.rule});
  }
  ex.run(q);
}

void route_step(Executor& ex, const PlanDiff& d, bool removals) {
  std::vector<RouteRequest> q;
  for (const auto& c : d.routes)
    if ((c.op == ChangeOp::remove) == removals) q.push_back({c.op, c.rule});
  ex.run(q);
}

// Relays before sources: if2 macvlans, clsact, filters, then neighbours and routes; removals
// in the reverse order (a route goes before its neighbour, filters before their clsact, a
// clsact before its macvlan).
void execute(Sockets& s, Executor& ex, const PlanDiff& d, const KernelState& k) {
  std::set<NeighKey> present;
  for (const auto& n : k.neighbours) present.insert({n.rule.dst, n.rule.dev});
  std::set<std::string> devices = k.devices;
  for (const auto& c : d.links) devices.insert(c.rule.name);
  link_step(s, ex, d, false);
  qdisc_step(s, ex, d, false);
  filter_step(s, ex, d, false, devices);
  neighbour_step(ex, d, false, present);
  route_step(ex, d, false);
  route_step(ex, d, true);
  neighbour_step(ex, d, true, present);
  filter_step(s, ex, d, true, devices);
  qdisc_step(s, ex, d, true);
  link_step(s, ex, d, true);
}

// Keys the plan needs that someone else holds: refused before anything is changed.
void check_foreign(const PlanDiff& d, const KernelState& k) {
  for (const auto& c : d.links)
    if (c.op == ChangeOp::add && k.devices.count(c.rule.name))
      throw Error(
          fmt::format("{}: an interface {} exists and is not ocslab's (ocslab only manages macvlans it created)",
                      render(c.rule), c.rule.name));
  for (const auto& c : d.qdiscs)
    if (c.op == ChangeOp::add && k.clsact_devs.count(c.rule.dev))
      throw Error(fmt::format("{}: {} already has a clsact qdisc that is not ocslab's", render(c.rule), c.rule.dev));
  for (const auto& c : d.routes) {
    if (c.op != ChangeOp::add) continue;
    for (const auto& r : k.routes)
      if (r.rule.dst == c.rule.dst && r.rule.protocol != kRouteProtocol && r.priority == 0)
        throw Error(fmt::format("{}: the main table already has {} dev {} proto {}, which is not ocslab's",
                                render(c.rule), r.rule.dst, r.rule.dev, r.rule.protocol));
  }
  for (const auto& c : d.neighbours) {
    if (c.op != ChangeOp::add) continue;
    for (const auto& n : k.neighbours)
      if (n.permanent() && n.rule.dst == c.rule.dst && n.rule.dev == c.rule.dev)
        throw Error(fmt::format("{}: a permanent neighbour {} lladdr {} dev {} exists and is not ocslab's",
                                render(c.rule), n.rule.dst, n.rule.lladdr, n.rule.dev));
  }
}

}  // namespace

HostPlan programmable(const HostPlan& plan, bool relay) {
  HostPlan p = plan;
  // A host that relays nothing needs no clsact and no if2: tc stays untouched.
  if (!relay || p.filters.empty()) {
    p.links.clear();
    p.qdiscs.clear();
    p.filters.clear();
  }
  return p;
}

HostNics host_nics() {
  HostNics n;
  n.management.insert("lo");
  RouteNetlink nl;
  for (const auto& r : nl.list_routes())
    if (r.prefix_len == 0 && !r.rule.dev.empty()) n.management.insert(r.rule.dev);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw Error(fmt::format("cannot list this host's addresses: {}", std::strerror(errno)));
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !a->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    std::string dev = a->ifa_name;
    n.addresses[dev.substr(0, dev.find(':'))].insert(text);  // "eth1:0" is a label of eth1
  }
  ::freeifaddrs(list);
  if (struct if_nameindex* names = ::if_nameindex()) {
    for (struct if_nameindex* i = names; i->if_index != 0; ++i) n.devices.insert(i->if_name);
    ::if_freenameindex(names);
  }
  return n;
}

namespace {

bool host_route(const std::string& dst) {
  auto slash = dst.find('/');
  in_addr a{};
  return slash != std::string::npos && dst.substr(slash) == "/32" &&
         ::inet_pton(AF_INET, dst.substr(0, slash).c_str(), &a) == 1;
}

std::string management_problem(const std::string& what, const std::string& dev, const HostNics& nics) {
  if (!nics.management.count(dev)) return {};
  return fmt::format("{}: {} is {}; a plan touches only the fabric's NICs", what, dev,
                     dev == "lo" ? "the loopback" : "the management interface (it holds the default route)");
}

std::string not_if1(const std::string& what, const std::string& dev) {
  return fmt::format("{}: {} is not one of the plan's own NICs (the devices its routes leave from their own address)",
                     what, dev);
}

}  // namespace

std::string plan_problem(const HostPlan& plan, const HostNics& nics) {
  std::set<std::string> if1s, clsacts;
  for (const auto& r : plan.routes) {
    std::string what = fmt::format("route {} dev {}", r.dst, r.dev);
    if (auto m = management_problem(what, r.dev, nics); !m.empty()) return m;
    if (r.protocol != kRouteProtocol)
      return fmt::format("{}: protocol {} is not ocslab's ({}): rollback and clear would never remove it", what,
                         r.protocol, kRouteProtocol);
    if (!host_route(r.dst)) return what + ": not an IPv4 /32 host route";
    if (!nics.devices.count(r.dev)) return fmt::format("{}: no network device '{}' in this namespace", what, r.dev);
    auto a = nics.addresses.find(r.dev);
    if (a == nics.addresses.end() || !a->second.count(r.src))
      return fmt::format("{}: src {} is not an address of {}", what, r.src, r.dev);
    if1s.insert(r.dev);
  }
  for (const auto& n : plan.neighbours) {
    std::string what = fmt::format("neighbour {} dev {}", n.dst, n.dev);
    if (auto m = management_problem(what, n.dev, nics); !m.empty()) return m;
    if (!if1s.count(n.dev)) return not_if1(what, n.dev);
  }
  for (const auto& l : plan.links) {
    std::string what = fmt::format("macvlan {} over {}", l.name, l.parent);
    if (auto m = management_problem(what, l.name, nics); !m.empty()) return m;
    if (auto m = management_problem(what, l.parent, nics); !m.empty()) return m;
    if (!if1s.count(l.parent)) return not_if1(what, l.parent);
  }
  for (const auto& q : plan.qdiscs) {
    if (auto m = management_problem("clsact on " + q.dev, q.dev, nics); !m.empty()) return m;
    clsacts.insert(q.dev);
  }
  for (const auto& f : plan.filters) {
    std::string what = fmt::format("filter {} on {} -> {}", f.dst, f.dev, f.redirect_dev);
    if (auto m = management_problem(what, f.dev, nics); !m.empty()) return m;
    if (auto m = management_problem(what, f.redirect_dev, nics); !m.empty()) return m;
    if (!clsacts.count(f.dev)) return fmt::format("{}: the plan has no clsact on {}", what, f.dev);
    if (!if1s.count(f.redirect_dev)) return not_if1(what, f.redirect_dev);
    if (!host_route(f.dst)) return what + ": not an IPv4 /32 destination";
  }
  return {};
}

Forwarder::Forwarder(ApplyOptions options) : opt_(std::move(options)) {}

std::string Forwarder::journal_path() const { return opt_.state_dir + "/journal.json"; }

std::optional<Journal> Forwarder::journal() const {
  // Never through a symlink: the journal names what a rollback deletes.
  auto text = read_checked_file(journal_path(), "forwarding journal", kMaxJournalBytes, FileAccess::kAny);
  if (!text) return std::nullopt;
  try {
    return journal_from_json(nlohmann::json::parse(*text));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not a forwarding journal: {}", journal_path(), e.what()));
  } catch (const Error& e) {
    throw ConfigError(fmt::format("{}: {}", journal_path(), e.what()));
  }
}

HostPlan Forwarder::installed(const std::string& host, const HostPlan& desired) {
  Known known;
  if (auto j = journal()) {
    known.add(j->before);
    known.add(j->target);
  }
  Sockets s;
  return read_kernel(s, host, known, desired).owned;
}

HostPlan Forwarder::installed(const std::string& host) {
  HostPlan none;
  none.host = host;
  return installed(host, none);
}

ApplyReport Forwarder::diff(const HostPlan& desired) {
  ApplyReport r;
  if (!opt_.relay) {
    r.skipped_qdiscs = desired.qdiscs.size();
    r.skipped_filters = desired.filters.size();
  }
  HostPlan target = programmable(desired, opt_.relay);
  r.changes = forwarding::diff(target, installed(desired.host, target));
  return r;
}

ApplyReport Forwarder::apply(const HostPlan& desired) {
  // Before the lock and the journal: a refused plan leaves no trace.
  if (auto problem = plan_problem(desired, host_nics()); !problem.empty())
    throw Error(fmt::format("refused: the plan for host {}: {}; nothing was installed", desired.host, problem));
  DirLock lock(opt_.state_dir);
  auto prev = journal();
  if (prev && (prev->status == "applying" || prev->status == "rolling-back"))
    throw Error(
        fmt::format("the last {} ({}, host {}) did not finish (journal {} says '{}'): run "
                    "'ocslab-agent forwarding rollback' first",
                    prev->operation, prev->time, prev->host, journal_path(), prev->status));
  ApplyReport r = transact(programmable(desired, opt_.relay), "apply", prev);
  if (!opt_.relay) {
    r.skipped_qdiscs = desired.qdiscs.size();
    r.skipped_filters = desired.filters.size();
  }
  return r;
}

ApplyReport Forwarder::clear(const std::string& host) {
  DirLock lock(opt_.state_dir);
  HostPlan empty;
  empty.host = host;
  return transact(empty, "clear", journal());
}

std::string op_id_problem(const std::string& id) {
  if (id.empty() || id.size() > 64) return "an operation id has 1 to 64 characters";
  if (id.find_first_not_of(kOpIdChars) != std::string::npos)
    return "an operation id has only letters, digits and . _ : -";
  return {};
}

ApplyReport Forwarder::rollback() {
  DirLock lock(opt_.state_dir);
  auto j = journal();
  if (!opt_.op_id.empty()) {  // undo exactly that operation, once
    ApplyReport r;
    if (!j || j->op_id != opt_.op_id) {
      r.note = fmt::format("nothing to roll back for operation {}: the journal's last operation is {}", opt_.op_id,
                           j ? fmt::format("{} '{}' ({})", j->operation, j->op_id, j->time) : std::string("none"));
      return r;
    }
    if (j->status == "rolled-back") {
      r.note = fmt::format("operation {} was already rolled back ({})", opt_.op_id, j->time);
      return r;
    }
  }
  if (!j) throw Error("nothing to roll back: no journal at " + journal_path());
  if (j->status == "rolled-back")
    throw Error(
        fmt::format("nothing to roll back: the last operation was a rollback ({}); apply a plan instead", j->time));
  HostPlan target = j->status == "rolling-back" ? j->target : j->before;
  return transact(target, "rollback", j);
}

ApplyReport Forwarder::transact(const HostPlan& target, const std::string& operation,
                                const std::optional<Journal>& prev) {
  SignalGuard signals;
  Known known;
  if (prev) {
    known.add(prev->before);
    known.add(prev->target);
  }
  Sockets s;
  KernelState k = read_kernel(s, target.host, known, target);
  ApplyReport report;
  report.changes = forwarding::diff(target, k.owned);
  if (report.changes.empty() && operation != "rollback") {  // nothing to do, journal unchanged
    if (prev && !opt_.op_id.empty() && prev->op_id == opt_.op_id && prev->operation == operation &&
        prev->status == "applied") {
      report.journaled = true;  // an earlier attempt of this very operation went through
      report.note = fmt::format("already done by an earlier attempt of operation {} ({})", opt_.op_id, prev->time);
    }
    return report;
  }
  bool rolling_back = operation == "rollback";
  if (!rolling_back) check_foreign(report.changes, k);

  Journal j;
  j.operation = operation;
  j.status = rolling_back ? "rolling-back" : "applying";
  j.host = target.host;
  j.time = now_utc();
  j.op_id = opt_.op_id;
  j.before = k.owned;
  j.target = target;
  write_journal(opt_.state_dir, j);  // before the first kernel change

  Executor ex(s.nl, opt_.chunk, rolling_back ? 0 : opt_.pause_after, true);
  try {
    check_signal();
    execute(s, ex, report.changes, k);
  } catch (const std::exception& e) {
    std::string cause = e.what();
    if (rolling_back)
      throw RestoreFailed(
          fmt::format("rollback stopped after {} of {} changes: {}; the journal still says "
                      "'rolling-back': run rollback again",
                      ex.done(), report.changes.size(), cause));
    try {
      Known all = known;
      all.add(j.before);
      all.add(j.target);
      KernelState now = read_kernel(s, target.host, all, j.before);
      PlanDiff back = forwarding::diff(j.before, now.owned);
      Executor restore(s.nl, opt_.chunk, 0, false);
      execute(s, restore, back, now);
      if (prev)
        write_journal(opt_.state_dir, *prev);  // the last completed operation is still the last
      else
        remove_journal(opt_.state_dir);
    } catch (const std::exception& e2) {
      throw RestoreFailed(
          fmt::format("{} failed: {}; restoring the previous state failed too: {}; the journal {} "
                      "keeps it: run 'ocslab-agent forwarding rollback'",
                      operation, cause, e2.what(), journal_path()));
    }
    throw ApplyFailed(fmt::format("{} failed after {} of {} changes: {}; the previous state was restored", operation,
                                  ex.done(), report.changes.size(), cause));
  }
  j.status = rolling_back ? "rolled-back" : "applied";
  j.time = now_utc();
  write_journal(opt_.state_dir, j);
  report.journaled = true;
  return report;
}

std::vector<InstalledFilter> owned_filters(const HostPlan& plan) {
  std::vector<InstalledFilter> out;
  if (plan.filters.empty()) return out;
  TcNetlink tc;
  auto index = tc.link_indexes();
  std::set<std::string> devs;
  for (const auto& f : plan.filters) devs.insert(f.dev);
  for (const auto& dev : devs) {
    if (!index.count(dev) || !tc.has_clsact(dev)) continue;
    for (auto& f : tc.list_owned(dev)) out.push_back(std::move(f));
  }
  return out;
}

nlohmann::json to_json(const Journal& j) {
  nlohmann::json out = {{"version", 1},   {"operation", j.operation},    {"status", j.status},         {"host", j.host},
                        {"time", j.time}, {"before", to_json(j.before)}, {"target", to_json(j.target)}};
  if (!j.op_id.empty()) out["op_id"] = j.op_id;
  return out;
}

Journal journal_from_json(const nlohmann::json& j) {
  Journal out;
  auto str = [&](const char* k) {
    if (!j.is_object() || !j.contains(k) || !j[k].is_string())
      throw Error(fmt::format("journal: missing field '{}'", k));
    return j[k].get<std::string>();
  };
  out.operation = str("operation");
  out.status = str("status");
  out.host = str("host");
  out.time = str("time");
  if (j.contains("op_id")) {  // journals written before operation ids have none
    out.op_id = str("op_id");
    if (auto p = op_id_problem(out.op_id); !p.empty()) throw Error("journal: op_id '" + out.op_id + "': " + p);
  }
  if (!j.contains("before") || !j.contains("target")) throw Error("journal: missing 'before' or 'target'");
  out.before = host_plan_from_json(j["before"]);
  out.target = host_plan_from_json(j["target"]);
  return out;
}

}  // namespace ocslab::forwarding
