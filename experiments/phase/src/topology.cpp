#include "ocslab/phase/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <set>

namespace ocslab::phase {

void JobLayout::validate() const {
  if (job.empty()) throw TopologyError("job layout: the job has no name");
  if (pp < 1 || pp > 1024) throw TopologyError(fmt::format("job {}: pp = {} (must be 1..1024)", job, pp));
  if (dims.size() > 9) {
    throw TopologyError(
        fmt::format("job {}: {} symmetric dimensions; a topo_id digit holds at most 9", job, dims.size()));
  }
  std::set<std::string> names{"pp"};
  for (const auto& d : dims) {
    if (d.name.empty()) throw TopologyError(fmt::format("job {}: a dimension has no name", job));
    if (!names.insert(d.name).second)
      throw TopologyError(fmt::format("job {}: dimension '{}' appears twice", job, d.name));
    if (d.size < 1 || d.size > 4096) {
      throw TopologyError(fmt::format("job {}: dimension {} has size {} (must be 1..4096)", job, d.name, d.size));
    }
  }
  if (static_cast<long long>(pp) * ranks_per_stage() > 1 << 20)
    throw TopologyError(fmt::format("job {}: too many ranks", job));
}

int JobLayout::ranks_per_stage() const {
  int n = 1;
  for (const auto& d : dims) n *= d.size;
  return n;
}

std::vector<int> JobLayout::coords(int local) const {
  std::vector<int> c(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    c[i] = local % dims[i].size;
    local /= dims[i].size;
  }
  return c;
}

int JobLayout::local_from(const std::vector<int>& c) const {
  int local = 0;
  for (size_t i = dims.size(); i-- > 0;) local = local * dims[i].size + c[i];
  return local;
}

std::string JobLayout::describe_digits() const {
  std::string s = "0=pp";
  for (size_t i = 0; i < dims.size(); ++i) s += fmt::format(", {}={}", i + 1, dims[i].name);
  return s;
}

int JobLayout::digit_of(std::string_view dimension) const {
  if (dimension == "pp") return 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].name == dimension) return static_cast<int>(i) + 1;
  }
  throw TopologyError(fmt::format("job {}: no dimension '{}' (it has {})", job, dimension, describe_digits()));
}

TopoId TopoId::uniform(const JobLayout& layout, int digit) {
  TopoId t(std::vector<uint8_t>(static_cast<size_t>(layout.pp), static_cast<uint8_t>(digit)));
  t.validate(layout);
  return t;
}

TopoId TopoId::parse(std::string_view text, const JobLayout& layout) {
  std::vector<uint8_t> digits;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9') {
      throw TopologyError(
          fmt::format("job {}: topo_id '{}': character {} ('{}') is not a digit", layout.job, text, i + 1, c));
    }
    digits.push_back(static_cast<uint8_t>(c - '0'));
  }
  TopoId t(std::move(digits));
  t.validate(layout);
  return t;
}

void TopoId::validate(const JobLayout& layout) const {
  if (digits_.size() != static_cast<size_t>(layout.pp)) {
    throw TopologyError(fmt::format("job {}: topo_id '{}' has {} digits but the job has {} pipeline stages", layout.job,
                                    str(), digits_.size(), layout.pp));
  }
  for (size_t s = 0; s < digits_.size(); ++s) {
    if (digits_[s] > layout.dims.size()) {
      throw TopologyError(fmt::format("job {}: topo_id '{}': digit {} at stage {} names a dimension the job lacks ({})",
                                      layout.job, str(), digits_[s], s, layout.describe_digits()));
    }
  }
}

std::string TopoId::str() const {
  std::string s;
  for (auto d : digits_) s += static_cast<char>('0' + d);
  return s;
}

std::vector<int> changed_stages(const TopoId& a, const TopoId& b) {
  if (a.stages() != b.stages()) {
    throw TopologyError(fmt::format("topo_ids '{}' and '{}' have different lengths", a.str(), b.str()));
  }
  std::vector<int> out;
  for (size_t s = 0; s < a.stages(); ++s) {
    if (a.digits()[s] != b.digits()[s]) out.push_back(static_cast<int>(s));
  }
  return out;
}

SubMappingTable::SubMappingTable(JobLayout layout) : layout_(std::move(layout)) {
  layout_.validate();
  const int rps = layout_.ranks_per_stage();
  for (int s = 0; s < layout_.pp; ++s) {
    for (int d = 0; d < layout_.n_parallel(); ++d) {
      SubMapping m{s, d, std::vector<int>(static_cast<size_t>(rps), -1)};
      for (int l = 0; l < rps; ++l) {
        if (d == 0) {
          m.next[static_cast<size_t>(l)] = l;  // same coordinates, stage resolved at compose
          continue;
        }
        const auto& dim = layout_.dims[static_cast<size_t>(d - 1)];
        if (dim.size < 2) continue;
        auto c = layout_.coords(l);
        c[static_cast<size_t>(d - 1)] = (c[static_cast<size_t>(d - 1)] + 1) % dim.size;
        m.next[static_cast<size_t>(l)] = layout_.local_from(c);
      }
      table_.push_back(std::move(m));
    }
  }
}

const SubMapping& SubMappingTable::at(int stage, int digit) const {
  if (stage < 0 || stage >= layout_.pp || digit < 0 || digit >= layout_.n_parallel()) {
    throw TopologyError(fmt::format("job {}: no sub-mapping for stage {} digit {}", layout_.job, stage, digit));
  }
  return table_[static_cast<size_t>(stage * layout_.n_parallel() + digit)];
}

size_t SubMappingTable::stored_entries() const {
  size_t n = 0;
  for (const auto& m : table_) n += m.next.size();
  return n;
}

std::vector<RankEdge> SubMappingTable::compose_stages(const TopoId& topo, const std::vector<int>& stages) const {
  topo.validate(layout_);
  const int rps = layout_.ranks_per_stage();
  std::vector<RankEdge> out;
  for (int s : stages) {
    int d = topo.digit(s);
    const auto& m = at(s, d);
    int target_stage = s;
    if (d == 0) {
      target_stage = -1;
      for (int k = 1; k < layout_.pp; ++k) {
        int t = (s + k) % layout_.pp;
        if (topo.digit(t) == 0) {
          target_stage = t;
          break;
        }
      }
      if (target_stage < 0) continue;  // the only stage in PP: nobody to talk to on this rail
    }
    for (int l = 0; l < rps; ++l) {
      int n = m.next[static_cast<size_t>(l)];
      if (n < 0) continue;
      out.push_back({s * rps + l, target_stage * rps + n});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<RankEdge> SubMappingTable::compose(const TopoId& topo) const {
  std::vector<int> all(static_cast<size_t>(layout_.pp));
  for (int s = 0; s < layout_.pp; ++s) all[static_cast<size_t>(s)] = s;
  return compose_stages(topo, all);
}

std::vector<int> SubMappingTable::affected_stages(const TopoId& a, const TopoId& b) const {
  std::vector<int> out;
  for (int s = 0; s < layout_.pp; ++s) {
    if (a.digit(s) != b.digit(s) || compose_stages(a, {s}) != compose_stages(b, {s})) out.push_back(s);
  }
  return out;
}

std::vector<int> SubMappingTable::touched_stages(const TopoId& a, const TopoId& b) const {
  auto ea = compose(a);
  auto eb = compose(b);
  std::vector<RankEdge> diff;
  std::set_symmetric_difference(ea.begin(), ea.end(), eb.begin(), eb.end(), std::back_inserter(diff));
  std::set<int> stages;
  for (const auto& e : diff) {
    stages.insert(layout_.stage_of(e.src));
    stages.insert(layout_.stage_of(e.dst));
  }
  return {stages.begin(), stages.end()};
}

std::vector<RankEdge> SubMappingTable::giant_ring() const {
  std::vector<RankEdge> out;
  int n = layout_.ranks();
  if (n < 2) return out;
  for (int r = 0; r < n; ++r) out.push_back({r, (r + 1) % n});
  return out;
}

std::vector<ocs::Circuit> to_circuits(const std::vector<RankEdge>& edges, const std::vector<Slot>& slots) {
  std::vector<ocs::Circuit> out;
  out.reserve(edges.size());
  for (const auto& e : edges) {
    if (e.src < 0 || e.dst < 0 || static_cast<size_t>(e.src) >= slots.size() ||
        static_cast<size_t>(e.dst) >= slots.size()) {
      throw TopologyError(
          fmt::format("edge {}->{} names a rank without a slot ({} slots)", e.src, e.dst, slots.size()));
    }
    out.push_back({slots[static_cast<size_t>(e.src)].ingress, slots[static_cast<size_t>(e.dst)].egress});
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ocslab::phase
