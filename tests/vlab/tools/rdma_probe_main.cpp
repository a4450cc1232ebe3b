// vlab_rdma_probe: runs the RDMA probe for a fixed time and prints every Sample as tidy CSV on
// stdout; the virtual-lab tests run it inside the guests (they see this machine's build
// folder through their 9p root).
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "ocslab/common/csv_writer.h"
#include "ocslab/probes/rdma_probe.h"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a;
  bool any_address = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--any-address") {
      any_address = true;
    } else if (i + 1 < argc) {
      a[argv[i]] = argv[i + 1];
      ++i;
    }
  }
  auto get = [&](const std::string& k, const std::string& d) { return a.count(k) ? a[k] : d; };
  if (!a.count("--role") || !a.count("--if") || !a.count("--control") || !a.count("--secret")) {
    std::cerr << "usage: vlab_rdma_probe --role server|client --if IF --control HOST:PORT --secret HEX "
                 "[--any-address] [--interval-us N] "
                 "[--timeout N] [--retry N] [--rnr N] [--counter-ms N] [--duration-s S] [--host NAME]\n";
    return 1;
  }
  ocslab::probes::RdmaProbeConfig c;
  c.role = get("--role", "") == "server" ? ocslab::probes::RdmaProbeConfig::Role::kServer
                                         : ocslab::probes::RdmaProbeConfig::Role::kClient;
  c.interface = get("--if", "");
  c.control = get("--control", "");
  c.secret = get("--secret", "");  // the control connection's (a test lab's: on the command line)
  c.any_address = any_address;     // a server on 0.0.0.0
  c.interval = std::chrono::microseconds(std::stoll(get("--interval-us", "10000")));
  c.timeout = static_cast<uint8_t>(std::stoi(get("--timeout", "14")));
  c.retry_cnt = static_cast<uint8_t>(std::stoi(get("--retry", "7")));
  c.rnr_retry = static_cast<uint8_t>(std::stoi(get("--rnr", "7")));
  c.counter_period = std::chrono::milliseconds(std::stoll(get("--counter-ms", "100")));
  c.host = get("--host", "");
  double duration = std::stod(get("--duration-s", "10"));
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  std::mutex mu;
  std::vector<ocslab::Sample> samples;
  ocslab::probes::RdmaProbe probe(c);
  auto status = probe.start([&](const ocslab::Sample& s) {
    std::lock_guard<std::mutex> lock(mu);
    samples.push_back(s);
  });
  if (!status.available) {
    std::cerr << "rdma probe unavailable: " << status.reason << "\n";
    return 2;
  }
  std::cerr << "rdma probe: " << status.method << "\n";
  // load-safe: the probe runs for the duration it was asked (a command-line parameter).
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration);
  while (!g_stop && std::chrono::steady_clock::now() < end)
    // load-safe: the poll interval of the run above.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // kept: runs for the requested duration
  probe.stop();
  ocslab::CsvWriter csv(std::cout);
  csv.header(ocslab::sample_csv_columns());
  for (const auto& s : samples) csv.row(ocslab::sample_csv_fields(s));
  csv.flush();
  std::cerr << "completions " << probe.completions() << " errors " << probe.errors() << " recreated "
            << probe.recreated() << "\n";
  return 0;
}
