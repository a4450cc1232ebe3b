#include "ocslab/runner/job_localisation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace ocslab::runner {

namespace {

using Kind = phase::ControllerEvent::Kind;

struct Stop {
  int rank = -1;
  std::string host, how, message;
  int64_t t_ns = 0;
  bool disconnected = false;  // its controller connection closed without a bye
};

std::string how_of(const RankEnd& e) {
  if (e.exit_status < 0) return "was killed by a signal";
  return fmt::format("exited with status {}", e.exit_status);
}

}  // namespace

std::optional<JobLocalisation> localise_job(const std::vector<phase::ControllerEvent>& events,
                                            const std::vector<RankEnd>& ends,
                                            const std::function<int(const std::string&, int64_t)>& step_of,
                                            int64_t t0_ns, const std::map<int, int>& row_steps) {
  std::map<int, Stop> stops;
  std::map<int, int> last_step;
  std::set<int> rows_later;  // ranks whose rows place them after their last request's step
  std::set<int> by_rows;     // ranks placed by their rows alone (no request: native mode)
  for (const auto& e : events) {
    if (e.rank < 0) continue;
    if (e.kind == Kind::kRequest) {
      const int s = step_of(e.group, e.seq);
      if (s >= 0) last_step[e.rank] = std::max(last_step[e.rank], s);
    } else if (e.kind == Kind::kDisconnect && !stops.count(e.rank)) {
      Stop& st = stops[e.rank];
      st.rank = e.rank;
      st.t_ns = e.real_ns;
      st.disconnected = true;
      st.how = "disconnected";
    }
  }
  for (const auto& [rank, s] : row_steps) {  // finished a step's ops and stopped before the next's first request
    auto [it, fresh] = last_step.try_emplace(rank, s);
    if (fresh) {
      by_rows.insert(rank);
    } else if (s > it->second) {
      it->second = s;
      rows_later.insert(rank);
    }
  }
  for (const auto& end : ends) {
    if (end.exit_status == 0) continue;
    auto [it, fresh] = stops.try_emplace(end.rank);
    Stop& st = it->second;
    st.rank = end.rank;
    if (fresh) st.t_ns = end.ended_ns;  // no disconnect seen: when its launcher saw it end
    st.host = end.host;
    st.how = how_of(end);
    st.message = end.message;
  }
  for (const auto& end : ends) {
    if (auto it = stops.find(end.rank); it != stops.end() && it->second.host.empty()) it->second.host = end.host;
  }
  if (stops.empty()) return std::nullopt;

  std::vector<Stop> order;
  for (auto& [r, st] : stops) order.push_back(st);
  std::sort(order.begin(), order.end(),
            [](const Stop& a, const Stop& b) { return std::tie(a.t_ns, a.rank) < std::tie(b.t_ns, b.rank); });
  const Stop& first = order.front();
  JobLocalisation l;
  l.rank = first.rank;
  l.host = first.host;
  l.stopped_ns = first.t_ns;
  l.how = first.how;
  l.failed = order.size();
  if (auto it = last_step.find(first.rank); it != last_step.end()) l.step = it->second;
  const std::string where = first.host.empty() ? "" : " on " + first.host;
  const std::string step = l.step >= 0 ? fmt::format("step {}", l.step) : std::string("the job");
  l.verdict = fmt::format("{} did not complete: rank {}{} stopped first ({}) at +{:.3f} s", step, first.rank, where,
                          first.how, static_cast<double>(first.t_ns - t0_ns) / 1e9);
  if (order.size() > 1) {
    l.verdict += fmt::format("; {} other rank(s) stopped after it, the first {:.1f} ms later", order.size() - 1,
                             static_cast<double>(order[1].t_ns - first.t_ns) / 1e6);
  }
  for (const auto& st : order) {
    std::string line = fmt::format("rank {}{} {} at {:+.1f} ms", st.rank, st.host.empty() ? "" : " on " + st.host,
                                   st.how, static_cast<double>(st.t_ns - first.t_ns) / 1e6);
    if (st.disconnected && st.how != "disconnected") line += " (its controller connection closed then)";
    if (auto it = last_step.find(st.rank); it != last_step.end()) {
      if (rows_later.count(st.rank))
        line += fmt::format(", every op through step {} finished", it->second - 1);
      else if (by_rows.count(st.rank))
        line += fmt::format(", in step {} by its op rows", it->second);
      else
        line += fmt::format(", last request in step {}", it->second);
    }
    if (!st.message.empty()) line += ": " + st.message;
    l.evidence.push_back(line);
  }
  return l;
}

std::map<int, int> rows_step_of(const std::vector<std::pair<int, int>>& rank_step_rows,
                                const std::vector<int>& ops_per_step) {
  std::map<int, std::map<int, int>> done;  // rank -> step -> rows
  for (const auto& [rank, step] : rank_step_rows) ++done[rank][step];
  std::map<int, int> out;
  for (const auto& [rank, steps] : done) {
    if (rank < 0 || static_cast<size_t>(rank) >= ops_per_step.size() || ops_per_step[static_cast<size_t>(rank)] <= 0)
      continue;
    const int need = ops_per_step[static_cast<size_t>(rank)];
    int s = 0;
    while (steps.count(s) && steps.at(s) >= need) ++s;
    out[rank] = s;
  }
  return out;
}

}  // namespace ocslab::runner
