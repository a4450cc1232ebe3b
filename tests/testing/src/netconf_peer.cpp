// PLACEHOLDER: replaced by the Netconf grammar peer; must not survive the merge.
#include <stdexcept>

#include "ocslab/testing/peers.h"

namespace ocslab::testing {
void serve_netconf_session(int, int, PeerSwitch&, const PeerQuirks&) { throw std::logic_error("Netconf peer not written yet"); }
}  // namespace ocslab::testing
