// Host delivery of a NIC's link changes on a thread of its own. The emulated firmware changes
// a link's state on the emulator's event loop (its timers keep the lab's time); telling the
// host (QMP `set_link` to that host's QEMU) waits for QEMU's main loop, which on a loaded
// machine with TCG guests can answer tens of ms late. Delivered on the loop, that wait delayed
// the firmware transitions of every other NIC due at the same time. Here it delays only this
// NIC's carrier, which is where a real host's driver latency shows as well.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "ocslab/emulator/ground_truth.h"
#include "ocslab/emulator/link_driver.h"

namespace ocslab::emu {

// Wraps `inner` so that set_link returns at once and the changes reach the host in order on a
// delivery thread. The first call is delivered before set_link returns and its failure is
// thrown (at start a failure means the lab is miswired); a later failure is logged and recorded
// as a ground-truth row (source `emulator`, subject nic_name, signal `link_driver_error`, 1).
// Every delivery is recorded as signal `link_delivery`: the ms from set_link to the host's
// answer. Destroying the wrapper waits for a delivery in progress and drops queued ones.
std::unique_ptr<LinkDriver> make_async_link_driver(std::unique_ptr<LinkDriver> inner, GroundTruth& truth,
                                                   std::string nic_name);

// A link change the host was not told of: logged with its reason and recorded as the
// ground-truth row `link_driver_error` (1). The firmware state changed all the same (the data
// plane follows it). Used wherever a delivery fails after start, on the loop or off it.
void record_undelivered_link(GroundTruth& truth, const std::string& nic_name, bool up, const std::exception& why);

}  // namespace ocslab::emu
