#include "ocslab/probes/gid_probe.h"

#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ocslab/common/clock.h"
#include "ocslab/common/error.h"
#include "ocslab/common/netlink_socket.h"

namespace ocslab::probes {

namespace {

std::string gid_unit(const GidEntry& e) { return fmt::format("{} {}", gid_type_name(e.type), gid_address(e.gid)); }

std::string neigh_unit(const NeighEntry& e) {
  return e.lladdr.empty() ? nud_state_name(e.state) : fmt::format("{} {}", nud_state_name(e.state), e.lladdr);
}

const char* gid_signal(GidChange::Kind k) {
  switch (k) {
    case GidChange::Kind::kAdded:
      return "gid_added";
    case GidChange::Kind::kRemoved:
      return "gid_removed";
    case GidChange::Kind::kChanged:
      break;
  }
  return "gid_changed";
}

const char* neigh_signal(NeighChange::Kind k) {
  switch (k) {
    case NeighChange::Kind::kAdded:
      return "neigh_added";
    case NeighChange::Kind::kRemoved:
      return "neigh_removed";
    case NeighChange::Kind::kChanged:
      break;
  }
  return "neigh_changed";
}

}  // namespace

GidProbe::GidProbe(GidProbeConfig config) : config_(std::move(config)) {
  if (config_.interval.count() < 1) throw Error("probe gid: interval must be >= 1 ms");
  if (config_.full_scan_every < 1) throw Error("probe gid: full_scan_every must be >= 1");
}

GidProbe::~GidProbe() { stop(); }

uint64_t GidProbe::polls() const {
  std::lock_guard lock(mu_);
  return polls_;
}

Sample GidProbe::sample(const std::string& subject, const std::string& signal, double value,
                        const std::string& unit) const {
  Sample s;
  s.host = config_.host;
  s.source = "gid";
  s.subject = subject;
  s.signal = signal;
  s.value = value;
  s.unit = unit;
  return s;
}

ProbeStatus GidProbe::start(SampleSink sink) {
  {
    std::lock_guard lock(mu_);
    if (started_) throw Error("gid probe started twice");
    started_ = true;
  }
  std::vector<std::string> methods, missing;
  auto ports = find_gid_ports(config_.interface, config_.sysfs_root);
  if (ports.empty()) {
    missing.push_back(fmt::format("no RDMA device serves {} (no GID entry names it under {})", config_.interface,
                                  config_.sysfs_root));
  } else {
    std::string where;
    for (const auto& p : ports) where += fmt::format("{}{} port {}", where.empty() ? "" : ", ", p.device, p.port);
    methods.push_back(fmt::format("sysfs GID table ({})", where));
    gids_ = std::make_unique<GidTableReader>(config_.sysfs_root, config_.interface, ports);
  }
  if (config_.neighbours) {
    ifindex_ = static_cast<int>(::if_nametoindex(config_.interface.c_str()));
    if (ifindex_ == 0) {
      missing.push_back(fmt::format("no neighbours: no interface {} in this namespace", config_.interface));
    } else {
      try {
        neigh_sock_ = std::make_unique<NetlinkSocket>(NETLINK_ROUTE);
        methods.emplace_back("RTM_GETNEIGH dump");
      } catch (const Error& e) {
        missing.push_back(std::string("no neighbours: ") + e.what());
      }
    }
  }
  std::string reason;
  for (const auto& m : missing) reason += (reason.empty() ? "" : "; ") + m;
  if (methods.empty()) return {false, "", reason};
  poll(first_, true);
  sink_ = std::move(sink);
  thread_ = std::thread([this] { run(); });
  std::string method;
  for (const auto& m : methods) method += (method.empty() ? "" : " + ") + m;
  return {true, fmt::format("{} every {} ms", method, config_.interval.count()), reason};
}

void GidProbe::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GidProbe::poll(std::vector<Sample>& out, bool first) {
  uint64_t n = 0;
  {
    std::lock_guard lock(mu_);
    n = polls_;
  }
  std::vector<GidEntry> gids;
  if (gids_) {
    gids = gids_->read(first || n % static_cast<uint64_t>(config_.full_scan_every) == 0);
    for (const auto& e : gids_->errors()) spdlog::warn("GID probe {}: {}", config_.interface, e);
  }
  std::vector<NeighEntry> neigh = neigh_table_;
  if (neigh_sock_) {
    try {
      neigh = dump_neighbours(*neigh_sock_, ifindex_);
      neigh_failing_ = false;
    } catch (const Error& e) {
      // Keep the last table: a failed dump is not every neighbour gone.
      if (!neigh_failing_) spdlog::warn("GID probe {}: neighbour dump failed: {}", config_.interface, e.what());
      neigh_failing_ = true;
    }
  }
  const Timestamp ts = now();
  const size_t from = out.size();
  if (first) {
    for (const auto& e : gids)
      out.push_back(sample(fmt::format("{}/{}/{}", e.device, e.port, config_.interface), "gid", e.index, gid_unit(e)));
    for (const auto& e : neigh)
      out.push_back(sample(config_.interface + "@" + e.address, "neigh", e.state, neigh_unit(e)));
  } else {
    for (const auto& c : diff_gid_tables(gid_table_, gids))
      out.push_back(sample(fmt::format("{}/{}/{}", c.entry.device, c.entry.port, config_.interface), gid_signal(c.kind),
                           c.entry.index, gid_unit(c.entry)));
    for (const auto& c : diff_neighbours(neigh_table_, neigh))
      out.push_back(
          sample(config_.interface + "@" + c.entry.address, neigh_signal(c.kind), c.entry.state, neigh_unit(c.entry)));
  }
  for (size_t i = from; i < out.size(); ++i) {
    out[i].t_ns = ts.realtime_ns;
    out[i].mono_ns = ts.monotonic_ns;
  }
  gid_table_ = std::move(gids);
  neigh_table_ = std::move(neigh);
  std::lock_guard lock(mu_);
  ++polls_;
}

void GidProbe::run() {
  for (const auto& s : first_) sink_(s);
  first_.clear();
  // Polls on a fixed grid from the start, so a slow poll does not shift the later ones.
  const auto start = std::chrono::steady_clock::now();
  std::vector<Sample> out;
  for (long long k = 1;; ++k) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, start + k * config_.interval, [this] { return stop_; })) return;
    }
    out.clear();
    poll(out, false);
    for (const auto& s : out) sink_(s);
  }
}

}  // namespace ocslab::probes
