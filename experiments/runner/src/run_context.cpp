#include "ocslab/runner/run_context.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <filesystem>
#include <ostream>

#include "ocslab/common/clock.h"
#include "ocslab/common/durable_file.h"
#include "ocslab/common/error.h"
#include "ocslab/runner/capture_store.h"
#include "ocslab/runner/run_types.h"

namespace ocslab::runner {

namespace fs = std::filesystem;

namespace {

std::string timestamp_for_name() {
  auto t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

void RunContext::log(const std::string& msg) const {
  spdlog::info("{}", msg);
  if (opt_.log) *opt_.log << "ocslab run: " << msg << "\n" << std::flush;
}

void RunContext::event(const std::string& type, nlohmann::json fields) const {
  if (opt_.events) opt_.events(make_run_event(type, std::move(fields), realtime_ns()));
}

bool RunContext::interrupted() const { return opt_.interrupted && opt_.interrupted->load(); }

void open_results(const ExperimentSpec& spec, const RunContext& ctx, RunResult& result) {
  const RunOptions& opt = ctx.options();
  result.run_id = spec.name + "-" + timestamp_for_name();
  result.folder = opt.output_dir.empty() ? spec.output + "/" + result.run_id : opt.output_dir;
  if (!opt.output_dir.empty()) result.run_id = fs::path(opt.output_dir).filename().string();
  fs::create_directories(result.folder);
  ctx.log("results in " + result.folder);
  ctx.event("run_start", {{"spec", spec.origin}, {"name", spec.name}, {"type", spec.type}, {"run_id", result.run_id},
                          {"folder", result.folder}, {"hosts", spec.hosts.size()}});
}

void write_timeline(const std::string& path, const std::vector<Sample>& samples, const std::string& run,
                    const std::function<int(int64_t)>& iteration) {
  write_file_atomic(path, [&](DurableFile& out) {
    auto cols = sample_csv_columns();
    cols.push_back("run");
    cols.push_back("iteration");
    out.append(csv_row(cols));
    for (const auto& s : samples) {
      auto f = sample_csv_fields(s);
      f.push_back(run);
      f.push_back(std::to_string(iteration(s.t_ns)));
      out.append(csv_row(f));
    }
  });
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&](DurableFile& out) { out.append(text); });
}

std::string iso_time(int64_t ns) {
  std::time_t s = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>((ns / 1'000'000) % 1000));
}

}  // namespace ocslab::runner
