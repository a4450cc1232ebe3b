// `ocslab-agent forwarding ping`: the verify matrix's reachability check. One RC queue pair
// through the probes library's RDMA probe (the same code that measures outages in a run), run
// until enough good completions arrived or the time is up. The QP exchange is the probe's: on
// the --listen address only, authenticated with the --secret-file's secret, bounded lines with
// absolute deadlines (probes/include/ocslab/probes/rdma_control.h).
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "ocslab/agent/forwarding_cli.h"
#include "ocslab/common/error.h"
#include "ocslab/common/exit_code.h"
#include "ocslab/probes/rdma_control.h"
#include "ocslab/probes/rdma_probe.h"

namespace ocslab::agent {

std::string read_ping_secret(const std::string& path) {
  int fd = path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError("--secret-file " + path, errno);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf) - text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.find('\n') != std::string::npos || text.size() >= sizeof(buf)) break;
  }
  if (fd != STDIN_FILENO) ::close(fd);
  std::string secret = text.substr(0, text.find('\n'));
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (!probes::valid_control_secret(secret))
    throw Error("--secret-file " + path + ": its first line must be the control secret, 32 to 256 hex digits");
  return secret;
}

int forwarding_ping(const PingOptions& o, std::ostream& out, std::ostream& err) {
  const std::string& iface = o.iface;
  const std::string& listen = o.listen;
  const int count = o.count;
  const double timeout_s = o.timeout_s;
  if (!listen.empty() && !o.any_address && probes::is_wildcard_host(listen.substr(0, listen.rfind(':')))) {
    err << "ocslab-agent forwarding ping: --listen " << listen
        << " is every address of this host; give the address the client connects to (the management "
           "address), or add --any-address\n";
    return kExitUsage;
  }
  probes::RdmaProbeConfig c;
  c.role = listen.empty() ? probes::RdmaProbeConfig::Role::kClient : probes::RdmaProbeConfig::Role::kServer;
  c.interface = iface;
  c.control = listen.empty() ? o.connect : listen;
  c.secret = o.secret;
  c.any_address = o.any_address;
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
