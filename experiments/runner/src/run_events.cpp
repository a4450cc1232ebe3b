#include "ocslab/runner/run_events.h"

#include <memory>
#include <mutex>
#include <ostream>

namespace ocslab::runner {

nlohmann::json make_run_event(const std::string& type, nlohmann::json fields, int64_t t_ns) {
  nlohmann::json event = {{"event", type}, {"t_ns", t_ns}};
  if (fields.is_object()) event.update(fields);
  return event;
}

RunEventSink json_lines_event_sink(std::ostream& out) {
  auto mutex = std::make_shared<std::mutex>();
  return [&out, mutex](const nlohmann::json& event) {
    std::lock_guard lock(*mutex);
    out << event.dump() << "\n" << std::flush;
  };
}

}  // namespace ocslab::runner
