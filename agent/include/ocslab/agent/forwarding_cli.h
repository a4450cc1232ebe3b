// `ocslab-agent forwarding plan|diff|apply|rollback|clear`: the host-based forwarding rules of
// one fabric host, printed, diffed against the kernel, applied transactionally or undone.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ocslab::agent {

// args: after "forwarding". Exit codes in forwarding_help().
int run_forwarding_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
std::string forwarding_help();
// `forwarding ping`: an RC queue pair between two hosts through the probes library's RDMA probe,
// counting good completions (client: SENDs acknowledged; server: RECVs). Exactly one of
// listen / connect; the secret authenticates the QP exchange (both sides the same). Prints one
// JSON line; exit 0 when `count` arrived, 3 when the probe cannot run (also: a wildcard listen
// address without any_address), 4 on timeout.
struct PingOptions {
  std::string iface, listen, connect, secret;
  bool any_address = false;
  int count = 20;
  double timeout_s = 20;
};
int forwarding_ping(const PingOptions& options, std::ostream& out, std::ostream& err);
// The secret of --secret-file: the file's first line ("-": standard input), at most 4 KiB read;
// throws Error when it is missing or not 32 to 256 hex digits (the message never quotes it).
std::string read_ping_secret(const std::string& path);

}  // namespace ocslab::agent
