// The event sink of `ocslab run --json-stream` (runner/run_events.h) and RunContext::event.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "ocslab/runner/run_context.h"
#include "ocslab/runner/run_events.h"
#include "ocslab/runner/runner.h"

using namespace ocslab::runner;

TEST_CASE("an event is its fields with the type and the time") {
  auto e = make_run_event("reconfiguration", {{"i", 3}, {"n", 10}, {"mapping", "b"}}, 42);
  CHECK(e == nlohmann::json{{"event", "reconfiguration"}, {"t_ns", 42}, {"i", 3}, {"n", 10}, {"mapping", "b"}});
  CHECK(make_run_event("run_start", nullptr, 7) == nlohmann::json{{"event", "run_start"}, {"t_ns", 7}});
}

TEST_CASE("the JSON-lines sink writes whole lines, one object each, from several threads") {
  std::ostringstream out;
  RunEventSink sink = json_lines_event_sink(out);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i)
        sink(make_run_event("host_state", {{"host", "h" + std::to_string(t)}, {"i", i}}, i));
    });
  }
  for (auto& t : threads) t.join();
  std::istringstream in(out.str());
  std::map<std::string, int> next;
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    auto e = nlohmann::json::parse(line);  // throws on an interleaved or cut line
    const std::string host = e["host"];
    CHECK(e["i"] == next[host]++);  // each thread's events in its order
  }
  CHECK(lines == 800);
}

TEST_CASE("RunContext::event reaches the run's sink, stamped with the wall clock, and nothing without one") {
  RunOptions o;
  const RunContext quiet(o);
  quiet.event("problem", {{"message", "x"}});  // no sink: nothing to call, nothing thrown

  std::vector<nlohmann::json> got;
  o.events = [&](const nlohmann::json& e) { got.push_back(e); };
  const RunContext ctx(o);
  const auto before =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  ctx.event("problem", {{"message", "host h2 lost"}});
  REQUIRE(got.size() == 1);
  CHECK(got[0]["event"] == "problem");
  CHECK(got[0]["message"] == "host h2 lost");
  CHECK(got[0]["t_ns"].get<int64_t>() >= before);
}
