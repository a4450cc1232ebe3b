// Running an io_context "for a while" in unit tests without depending on the host's timing.
// io_context::run_for(d) stops at a wall-clock deadline: on a loaded 2-core CI machine under ASan,
// a thread preempted for a few milliseconds can reach that deadline before a timer that was due at
// once has run, and the test sees a reply missing. run_through(io, d) instead arms a marker timer
// d from now and runs until the marker's handler has run, then drains whatever is ready: every
// timer due before the marker has fired (timers fire in deadline order) however late the thread ran.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

namespace ocslab::testing {

inline void run_through(boost::asio::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  bool reached = false;
  boost::asio::steady_timer marker(io, d);
  marker.async_wait([&](const boost::system::error_code&) { reached = true; });
  while (!reached && io.run_one() > 0) {
  }
  io.restart();
  io.poll();  // handlers posted by the last timers' handlers (zero-delay chains)
}

}  // namespace ocslab::testing
