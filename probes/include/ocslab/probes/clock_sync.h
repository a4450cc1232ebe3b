// The local clock's synchronisation state, as the kernel's time discipline reports it (every
// sync daemon, chrony, ntpd, ptp4l/phc2sys, steers the clock through adjtimex), plus which of
// those daemons run. Recorded next to the measured clock offsets so a timeline says how far
// each host's clock could be trusted.
#pragma once

#include <string>
#include <vector>

namespace ocslab::probes {

struct ClockSyncState {
  bool readable = false;      // adjtimex answered
  bool synchronized = false;  // the kernel does not flag the clock unsynchronised (STA_UNSYNC)
  long max_error_us = 0;      // the kernel's maximum error estimate
  long est_error_us = 0;      // its estimated error
  std::vector<std::string> daemons;  // running: chronyd, ntpd, ptp4l, phc2sys, systemd-timesyncd
  std::string describe() const;       // "synchronized (est 12 us, max 512 us) by chronyd"
};

ClockSyncState read_clock_sync_state();

}  // namespace ocslab::probes
