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
// listen / connect. Prints one JSON line; exit 0 when `count` arrived, 4 on timeout.
int forwarding_ping(const std::string& iface, const std::string& listen, const std::string& connect, int count,
                    double timeout_s, std::ostream& out, std::ostream& err);

}  // namespace ocslab::agent
