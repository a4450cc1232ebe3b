#include "ocslab/probes/clock_sync.h"

#include <sys/timex.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>

namespace ocslab::probes {

std::string ClockSyncState::describe() const {
  if (!readable) return "unknown (adjtimex failed)";
  std::string by;
  for (const auto& d : daemons) by += (by.empty() ? " by " : ", ") + d;
  return fmt::format("{} (est {} us, max {} us){}", synchronized ? "synchronized" : "unsynchronized", est_error_us,
                     max_error_us, by.empty() ? ", no sync daemon running" : by);
}

ClockSyncState read_clock_sync_state() {
  ClockSyncState s;
  timex tx{};  // modes = 0: read only
  int state = ::adjtimex(&tx);
  if (state >= 0) {
    s.readable = true;
    s.synchronized = state != TIME_ERROR && !(tx.status & STA_UNSYNC);
    s.max_error_us = tx.maxerror;
    s.est_error_us = tx.esterror;
  }
  static const std::set<std::string> kDaemons = {"chronyd", "ntpd", "ptp4l", "phc2sys", "systemd-timesyncd", "timemaster"};
  std::set<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    if (comm && std::getline(comm, name) && kDaemons.count(name)) found.insert(name);
  }
  s.daemons.assign(found.begin(), found.end());
  return s;
}

}  // namespace ocslab::probes
