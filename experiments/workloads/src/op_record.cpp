#include "ocslab/workloads/op_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <sstream>

#include "ocslab/common/csv_reader.h"
#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/workloads/ring.h"

namespace ocslab::workloads {

namespace {

template <typename T>
T number(const std::string& field, const std::string& where, const char* column) {
  T v{};
  auto [p, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || p != field.data() + field.size()) {
    throw ConfigError(fmt::format("{}: column {}: bad number '{}'", where, column, field));
  }
  return v;
}

// "12.345" microseconds with three decimals -> nanoseconds, exactly.
int64_t us_to_ns(const std::string& field, const std::string& where, const char* column) {
  auto dot = field.find('.');
  std::string whole = field.substr(0, dot), frac = dot == std::string::npos ? "" : field.substr(dot + 1);
  if (frac.size() > 3)
    throw ConfigError(fmt::format("{}: column {}: more than ns precision in '{}'", where, column, field));
  frac.resize(3, '0');
  bool neg = !whole.empty() && whole[0] == '-';
  // Unsigned parts: a second sign ("--5", "1.-5") is a bad number, and the range check keeps
  // w * 1000 + f (and its negation) inside int64_t.
  uint64_t w = number<uint64_t>(neg ? whole.substr(1) : whole, where, column);
  uint64_t f = number<uint64_t>(frac, where, column);
  if (w > (static_cast<uint64_t>(INT64_MAX) - f) / 1000)
    throw ConfigError(fmt::format("{}: column {}: '{}' is out of range", where, column, field));
  auto v = static_cast<int64_t>(w * 1000 + f);
  return neg ? -v : v;
}

std::string us(int64_t ns) {
  return fmt::format("{}{}.{:03}", ns < 0 ? "-" : "", (ns < 0 ? -ns : ns) / 1000, (ns < 0 ? -ns : ns) % 1000);
}

OpType type_of(const std::string& name, const std::string& where) {
  OpType o = OpType::kAllReduce;
  if (op_type_of(name, o)) return o;
  throw ConfigError(where + ": unknown op '" + name + "'");
}

}  // namespace

const std::vector<std::string>& op_csv_columns() {
  static const std::vector<std::string> c = {"rank",
                                             "host",
                                             "step",
                                             "warmup",
                                             "op_index",
                                             "seq",
                                             "group",
                                             "kind",
                                             "op",
                                             "ranks",
                                             "bytes",
                                             "start_ns",
                                             "end_ns",
                                             "time_us",
                                             "algbw_GBps",
                                             "busbw_GBps",
                                             "reconfig_wait_us",
                                             "wait_start_ns",
                                             "wrong",
                                             "verified",
                                             "phase",
                                             "reconfigured",
                                             "provisioned",
                                             "fallback",
                                             "topo",
                                             "compute_ns",
                                             "step_compute_ns",
                                             "barrier"};
  return c;
}

std::vector<std::string> op_csv_fields(const OpRecord& r) {
  double sec = static_cast<double>(r.duration_ns) / 1e9;
  return {std::to_string(r.rank),
          r.host,
          std::to_string(r.step),
          r.warmup ? "1" : "0",
          std::to_string(r.index),
          std::to_string(r.seq),
          r.group,
          r.kind,
          std::string(op_name(r.type)),
          std::to_string(r.group_size),
          std::to_string(r.bytes),
          std::to_string(r.start_ns),
          std::to_string(r.end_ns),
          us(r.duration_ns),
          fmt::format("{:.6f}", algbw_gbps(r.bytes, sec)),
          fmt::format("{:.6f}", busbw_gbps(r.type, r.group_size, r.bytes, sec)),
          us(r.wait_ns),
          std::to_string(r.wait_start_ns),
          std::to_string(r.wrong),
          r.verified ? "1" : "0",
          r.phase,
          r.reconfigured ? "1" : "0",
          r.provisioned ? "1" : "0",
          r.fallback ? "1" : "0",
          r.topo,
          std::to_string(r.compute_ns),
          std::to_string(r.step_compute_ns),
          r.barrier ? "1" : "0"};
}

std::vector<OpRecord> parse_op_csv(const std::string& text, const std::string& origin) {
  std::stringstream in(text);
  std::string line;
  std::vector<OpRecord> out;
  if (!std::getline(in, line)) return out;
  auto header = split_csv_line(line);
  // Results folders from before the compute and barrier columns: the same header less the last
  // one (barrier) or the last three (compute_ns, step_compute_ns, barrier).
  const auto& columns = op_csv_columns();
  auto prefix_less = [&](size_t n) {
    return header.size() + n == columns.size() && std::equal(header.begin(), header.end(), columns.begin());
  };
  const bool has_barrier = header == columns;
  const bool has_compute = has_barrier || prefix_less(1);
  if (!has_compute && !prefix_less(3)) {
    throw ConfigError(origin + ":1: not an ops CSV header (want " +
                      fmt::format("{}", fmt::join(op_csv_columns(), ",")) + ")");
  }
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::string where = fmt::format("{}:{}", origin, lineno);
    auto f = split_csv_line(line);
    if (f.size() != header.size()) {
      throw ConfigError(fmt::format("{}: {} fields, the header has {}", where, f.size(), header.size()));
    }
    OpRecord r;
    r.rank = number<int>(f[0], where, "rank");
    r.host = f[1];
    r.step = number<int>(f[2], where, "step");
    r.warmup = f[3] == "1";
    r.index = number<int>(f[4], where, "op_index");
    r.seq = number<uint64_t>(f[5], where, "seq");
    r.group = f[6];
    r.kind = f[7];
    r.type = type_of(f[8], where);
    r.group_size = number<int>(f[9], where, "ranks");
    r.bytes = number<uint64_t>(f[10], where, "bytes");
    r.start_ns = number<int64_t>(f[11], where, "start_ns");
    r.end_ns = number<int64_t>(f[12], where, "end_ns");
    r.duration_ns = us_to_ns(f[13], where, "time_us");
    r.wait_ns = us_to_ns(f[16], where, "reconfig_wait_us");
    r.wait_start_ns = number<int64_t>(f[17], where, "wait_start_ns");
    r.wrong = number<uint64_t>(f[18], where, "wrong");
    r.verified = f[19] == "1";
    r.phase = f[20];
    r.reconfigured = f[21] == "1";
    r.provisioned = f[22] == "1";
    r.fallback = f[23] == "1";
    r.topo = f[24];
    if (has_compute) {
      r.compute_ns = number<int64_t>(f[25], where, "compute_ns");
      r.step_compute_ns = number<int64_t>(f[26], where, "step_compute_ns");
    }
    if (has_barrier) {
      if (f[27] != "0" && f[27] != "1")
        throw ConfigError(fmt::format("{}: column barrier: want 0 or 1, got '{}'", where, f[27]));
      r.barrier = f[27] == "1";
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Sample> op_samples(const OpRecord& r) {
  std::string subject = fmt::format("r{}/{}/{}#{}", r.rank, r.group, op_name(r.type), r.index);
  double sec = static_cast<double>(r.duration_ns) / 1e9;
  std::vector<Sample> out;
  auto add = [&](int64_t t, const char* signal, double value, const char* unit) {
    Sample s;
    s.t_ns = t;
    s.host = r.host;
    s.source = "collbench";
    s.subject = subject;
    s.signal = signal;
    s.value = value;
    s.unit = unit;
    out.push_back(std::move(s));
  };
  if (r.wait_ns > 0) add(r.wait_start_ns, "reconfig_wait", static_cast<double>(r.wait_ns) / 1e6, "ms");
  if (r.phase != "none") {
    add(r.wait_start_ns, "reconfigured", r.reconfigured ? 1 : 0, "bool");
    add(r.wait_start_ns, "provisioned", r.provisioned ? 1 : 0, "bool");
    add(r.wait_start_ns, "fallback", r.fallback ? 1 : 0, "bool");
  }
  add(r.start_ns, "op_start", static_cast<double>(r.bytes), "B");
  add(r.end_ns, "op_end", static_cast<double>(r.duration_ns) / 1e6, "ms");
  add(r.end_ns, "busbw", busbw_gbps(r.type, r.group_size, r.bytes, sec), "GB/s");
  return out;
}

std::string encode_records(const std::vector<OpRecord>& records) {
  std::stringstream ss;
  CsvWriter w(ss);
  w.header(op_csv_columns());
  for (const auto& r : records) w.row(op_csv_fields(r));
  return ss.str();
}

std::vector<OpRecord> decode_records(const std::string& text) { return parse_op_csv(text, "records from a rank"); }

std::vector<TableRow> summarize(const std::vector<OpRecord>& all) {
  // (index) -> step -> slowest rank of that step.
  std::map<int, std::map<int, const OpRecord*>> slowest;
  std::map<int, std::map<int, int64_t>> wait;
  std::map<int, uint64_t> wrong;
  std::map<int, const OpRecord*> any;
  for (const auto& r : all) {
    wrong[r.index] += r.wrong;
    any.emplace(r.index, &r);
    if (r.warmup) continue;
    auto& s = slowest[r.index][r.step];
    if (!s || r.duration_ns > s->duration_ns) s = &r;
    auto& w = wait[r.index][r.step];
    w = std::max(w, r.wait_ns);
  }
  std::vector<TableRow> rows;
  for (const auto& [index, first] : any) {
    TableRow row;
    row.index = index;
    row.group = first->group;
    row.kind = first->kind;
    row.type = first->type;
    row.group_size = first->group_size;
    row.bytes = first->bytes;
    row.wrong = wrong[index];
    double sum = 0, wsum = 0;
    for (const auto& [step, r] : slowest[index]) {
      sum += static_cast<double>(r->duration_ns);
      wsum += static_cast<double>(wait[index][step]);
      ++row.steps;
    }
    if (row.steps > 0) {
      row.time_us = sum / row.steps / 1e3;
      row.wait_us = wsum / row.steps / 1e3;
      row.algbw = algbw_gbps(row.bytes, row.time_us / 1e6);
      row.busbw = busbw_gbps(row.type, row.group_size, row.bytes, row.time_us / 1e6);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void print_table(std::ostream& out, const Schedule& s, const std::string& backend, const std::vector<TableRow>& rows,
                 const std::vector<OpRecord>& all) {
  out << fmt::format(
      "# ocslab-collbench-{}: schedule '{}' ({}), {} rank(s), {} op(s) per step, {} step(s) + {} warm-up\n", backend,
      s.name, s.origin, s.ranks, s.step.size(), s.steps, s.warmup);
  out << "#  time: mean over measured steps of the slowest rank's duration; wait: time in the phase hooks\n";
  out << "#\n";
  out << fmt::format("# {:>3} {:>10} {:>5} {:>14} {:>5} {:>12} {:>11} {:>5} {:>6} {:>10} {:>8} {:>8} {:>10} {:>8}\n",
                     "op", "group", "kind", "collective", "ranks", "size", "count", "type", "redop", "time", "algbw",
                     "busbw", "wait", "#wrong");
  out << fmt::format("# {:>3} {:>10} {:>5} {:>14} {:>5} {:>12} {:>11} {:>5} {:>6} {:>10} {:>8} {:>8} {:>10} {:>8}\n",
                     "", "", "", "", "", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)", "");
  double bus_sum = 0;
  int bus_n = 0;
  uint64_t wrong = 0;
  for (const auto& r : rows) {
    bool data = r.type != OpType::kBarrier;
    out << fmt::format(
        "  {:>3} {:>10} {:>5} {:>14} {:>5} {:>12} {:>11} {:>5} {:>6} {:>10.1f} {:>8.3f} {:>8.3f} {:>10.1f} {:>8}\n",
        r.index, r.group, r.kind, op_name(r.type), r.group_size, r.bytes, r.bytes / 4, data ? "float" : "none",
        r.type == OpType::kAllReduce || r.type == OpType::kReduceScatter ? "sum" : "none", r.time_us, r.algbw, r.busbw,
        r.wait_us, r.wrong);
    if (data && r.steps > 0) {
      bus_sum += r.busbw;
      ++bus_n;
    }
    wrong += r.wrong;
  }
  // Step time: per step, the longest span a rank spent on the step's ops (sum of its durations
  // and waits), averaged over steps.
  std::map<int, std::map<int, int64_t>> per_step_rank, compute_step_rank;
  for (const auto& r : all) {
    if (r.warmup) continue;
    per_step_rank[r.step][r.rank] += r.duration_ns + r.wait_ns;
    compute_step_rank[r.step][r.rank] += r.compute_ns + r.step_compute_ns;
  }
  double compute_sum = 0;
  for (const auto& [step, ranks] : compute_step_rank) {
    int64_t m = 0;
    for (const auto& [rank, ns] : ranks) m = std::max(m, ns);
    compute_sum += static_cast<double>(m);
  }
  double step_sum = 0;
  for (const auto& [step, ranks] : per_step_rank) {
    int64_t m = 0;
    for (const auto& [rank, ns] : ranks) m = std::max(m, ns);
    step_sum += static_cast<double>(m);
  }
  out << fmt::format("# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  out << fmt::format("# Avg bus bandwidth    : {:.3f} GB/s\n", bus_n ? bus_sum / bus_n : 0.0);
  if (!per_step_rank.empty()) {
    out << fmt::format("# Avg step time        : {:.3f} ms (communication + wait, slowest rank)\n",
                       step_sum / static_cast<double>(per_step_rank.size()) / 1e6);
  }
  if (compute_sum > 0) {
    out << fmt::format("# Avg compute time     : {:.3f} ms (modelled compute, slowest rank)\n",
                       compute_sum / static_cast<double>(compute_step_rank.size()) / 1e6);
  }
  out << "#\n";
}

}  // namespace ocslab::workloads
