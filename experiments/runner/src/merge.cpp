#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "ocslab/common/csv_reader.h"
#include "ocslab/runner/runner.h"

namespace ocslab::runner {

int iteration_of(int64_t t_ns, const std::vector<int64_t>& issued_ns, int64_t guard_ns) {
  // issued_ns ascending; the number of issue times with issued - guard <= t.
  auto it = std::upper_bound(issued_ns.begin(), issued_ns.end(), t_ns,
                             [guard_ns](int64_t t, int64_t issued) { return t < issued - guard_ns; });
  return static_cast<int>(it - issued_ns.begin());
}

std::vector<Sample> read_ground_truth(const std::string& path, int64_t from_ns, int64_t to_ns,
                                      const std::vector<HostEntry>& hosts) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the emulator's ground truth " + path);
  std::map<std::string, std::pair<std::string, std::string>> nic_names;  // "h1-eth1" -> (h1, eth1)
  for (const auto& h : hosts) {
    for (const auto& n : h.nics) nic_names[h.name + "-" + n.name] = {h.name, n.name};
  }
  std::string line;
  std::vector<Sample> out;
  if (!std::getline(in, line)) return out;
  auto header = split_csv_line(line);
  auto col = [&](const char* name) -> size_t {
    auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw Error(fmt::format("{}: no column '{}' in the header", path, name));
    return static_cast<size_t>(it - header.begin());
  };
  size_t ct = col("t_ns"), cs = col("source"), csub = col("subject"), csig = col("signal"), cv = col("value"),
         cu = col("unit");
  size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto f = split_csv_line(line);
    if (f.size() < header.size()) continue;  // a row being written right now
    Sample s;
    try {
      s.t_ns = std::stoll(f[ct]);
      s.value = f[cv].empty() ? 0 : std::stod(f[cv]);
    } catch (const std::exception&) {
      throw Error(fmt::format("{}:{}: bad number in '{}'", path, lineno, line));
    }
    if (s.t_ns < from_ns || s.t_ns > to_ns) continue;
    s.source = f[cs];
    s.signal = f[csig];
    s.unit = f[cu];
    auto it = nic_names.find(f[csub]);
    if (s.source == "emulator" && it != nic_names.end()) {
      s.host = it->second.first;
      s.subject = it->second.second;
    } else {
      s.host = "switch";
      s.subject = f[csub];
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ocslab::runner
