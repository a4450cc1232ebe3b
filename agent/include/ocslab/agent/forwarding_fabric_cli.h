// `ocslab-agent forwarding fabric`: the fabric file derived from a wiring file and the OCS's
// circuits, read from an ocsctl mapping file or from the live switch (forwarding/wiring.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ocslab::agent {

// args: after "forwarding fabric". Exit codes in forwarding_fabric_help().
int run_forwarding_fabric_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
std::string forwarding_fabric_help();

}  // namespace ocslab::agent
