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

}  // namespace ocslab::agent
