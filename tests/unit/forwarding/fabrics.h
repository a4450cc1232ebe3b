// Fabrics built in code for the forwarding tests: rings, tori and random regular graphs, with
// names that sort like their numbers (h00, h01, ...) and unique addresses.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ocslab/forwarding/fabric.h"
#include "ocslab/testing/source_dir.h"

namespace fabrics {

using ocslab::forwarding::Fabric;

// The repository's forwarding/examples/<name>, also when the binary runs outside ctest.
inline std::string example(const std::string& name) {
  return ocslab::testing::source_dir() + "/forwarding/examples/" + name;
}

inline std::string host(int i) { return fmt::format("h{:02}", i); }

inline Fabric hosts_with_ports(int n, int ports) {
  Fabric f;
  for (int i = 0; i < n; ++i) {
    ocslab::forwarding::Host h;
    h.name = host(i);
    for (int j = 0; j < ports; ++j) {
      ocslab::forwarding::Port p;
      p.name = fmt::format("p{}", j);
      p.if1.name = fmt::format("eth{}", j + 1);
      p.if1.ip = {static_cast<uint32_t>((10u << 24) | (i << 8) | (j + 1)), 16};
      p.if1.mac = fmt::format("02:00:00:{:02x}:{:02x}:01", i, j);
      p.if2 = ocslab::forwarding::If2{fmt::format("eth{}v", j + 1), fmt::format("02:00:00:{:02x}:{:02x}:02", i, j), ""};
      h.ports.push_back(p);
    }
    f.hosts.push_back(h);
  }
  return f;
}

inline void connect(Fabric& f, int h1, int p1, int h2, int p2) {
  f.circuits.push_back({{host(h1), fmt::format("p{}", p1)}, {host(h2), fmt::format("p{}", p2)}, ""});
}

// h_i:p1 <-> h_{i+1}:p0
inline Fabric ring(int n) {
  Fabric f = hosts_with_ports(n, 2);
  for (int i = 0; i < n; ++i) connect(f, i, 1, (i + 1) % n, 0);
  return f;
}

// rows x cols torus; ports p0 east, p1 west, p2 south, p3 north; host index r * cols + c.
inline Fabric torus(int rows, int cols) {
  Fabric f = hosts_with_ports(rows * cols, 4);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      connect(f, r * cols + c, 0, r * cols + (c + 1) % cols, 1);
      connect(f, r * cols + c, 2, ((r + 1) % rows) * cols + c, 3);
    }
  return f;
}

// Random d-regular multigraph without self-loops (pairing of port stubs), connected.
inline Fabric random_regular(int n, int d, unsigned seed) {
  std::mt19937 rng(seed);
  for (;;) {
    Fabric f = hosts_with_ports(n, d);
    std::vector<std::pair<int, int>> stubs;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j) stubs.push_back({i, j});
    std::shuffle(stubs.begin(), stubs.end(), rng);
    bool ok = true;
    for (size_t k = 0; k + 1 < stubs.size(); k += 2) {
      if (stubs[k].first == stubs[k + 1].first) ok = false;
      connect(f, stubs[k].first, stubs[k].second, stubs[k + 1].first, stubs[k + 1].second);
    }
    if (!ok) continue;
    try {
      ocslab::forwarding::validate(f);
    } catch (const ocslab::Error&) {
      continue;  // not connected
    }
    return f;
  }
}

// Host-level BFS distances, independent of the library's routing.
inline std::map<std::string, int> bfs(const Fabric& f, const std::string& from) {
  std::map<std::string, int> dist{{from, 0}};
  std::deque<std::string> todo{from};
  while (!todo.empty()) {
    auto h = todo.front();
    todo.pop_front();
    for (const auto& c : f.circuits)
      for (auto [a, b] : {std::pair{c.a, c.b}, std::pair{c.b, c.a}})
        if (a.host == h && !dist.count(b.host)) {
          dist[b.host] = dist[h] + 1;
          todo.push_back(b.host);
        }
  }
  return dist;
}

}  // namespace fabrics
