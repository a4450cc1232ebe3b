// PLACEHOLDER: replaced by the Tl1 grammar peer; must not survive the merge.
#include <stdexcept>

#include "ocslab/testing/peers.h"

namespace ocslab::testing {
void serve_tl1_session(int, int, PeerSwitch&, const PeerQuirks&) { throw std::logic_error("Tl1 peer not written yet"); }
}  // namespace ocslab::testing
