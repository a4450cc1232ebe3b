// The progress of a run as events, for scripts that follow it live (`ocslab run --json-stream`,
// in the manner of `iperf3 --json-stream`): the run's start, each reconfiguration i/N, a host's
// state change, each problem as it happens, the run's end with its results folder. The runner
// emits them through RunContext::event(); where they go is the sink in RunOptions.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <iosfwd>
#include <string>

namespace ocslab::runner {

// Receives one event: {"event": TYPE, "t_ns": CLOCK_REALTIME ns, ...fields}. Called from the
// runner's thread; a sink shared with other threads does its own locking.
using RunEventSink = std::function<void(const nlohmann::json& event)>;

// The event object: `fields` with "event" and "t_ns" set (fields must be an object or null).
nlohmann::json make_run_event(const std::string& type, nlohmann::json fields, int64_t t_ns);

// A sink writing each event as one compact JSON line to out, flushed at once (JSON lines: a
// reader never waits for a buffer and never sees half an event). Serialised by a mutex.
RunEventSink json_lines_event_sink(std::ostream& out);

}  // namespace ocslab::runner
