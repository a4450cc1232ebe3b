// `ocslab-agent forwarding ping`: the verify matrix's reachability check. One RC queue pair
// through the probes library's RDMA probe (the same code that measures outages in a run), run
// until enough good completions arrived or the time is up.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ocslab/agent/forwarding_cli.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/probes/rdma_probe.h"

namespace ocslab::agent {

int forwarding_ping(const std::string& iface, const std::string& listen, const std::string& connect, int count,
                    double timeout_s, std::ostream& out, std::ostream& err) {
  probes::RdmaProbeConfig c;
  c.role = listen.empty() ? probes::RdmaProbeConfig::Role::kClient : probes::RdmaProbeConfig::Role::kServer;
  c.interface = iface;
  c.control = listen.empty() ? connect : listen;
  c.interval = std::chrono::microseconds(2000);
  c.counter_period = std::chrono::milliseconds(0);
  c.timeout = 12;  // ~17 ms ACK timeout: a wrong path shows up as errors, not as a long wait
  std::mutex m;
  std::condition_variable cv;
  long long ok = 0, bad = 0, setup_errors = 0;
  probes::RdmaProbe probe(c);
  auto t0 = std::chrono::steady_clock::now();
  auto st = probe.start([&](const Sample& s) {
    std::lock_guard lock(m);
    if (s.signal == "completion") {
      (s.value == 0 ? ok : bad)++;
    } else if (s.signal == "setup_error") {
      ++setup_errors;
    }
    cv.notify_all();
  });
  if (!st.available) {
    err << "ocslab-agent forwarding ping: the RDMA probe cannot run on " << iface << ": " << st.reason << "\n";
    return kExitRefused;
  }
  bool done = false;
  {
    std::unique_lock lock(m);
    done = cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return ok >= count; });
  }
  probe.stop();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lock(m);
  out << nlohmann::json{{"role", listen.empty() ? "client" : "server"},
                        {"if", iface},
                        {"ok", ok},
                        {"errors", bad},
                        {"setup_errors", setup_errors},
                        {"elapsed_ms", ms},
                        {"reached", done}}
             .dump()
      << "\n";
  return done ? kExitOk : kExitUnreachable;
}

}  // namespace ocslab::agent
