#include "ocslab/runner/run_context.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "ocslab/common/csv_writer.h"
#include "ocslab/common/error.h"
#include "ocslab/runner/runner.h"

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

bool RunContext::interrupted() const { return opt_.interrupted && opt_.interrupted->load(); }

void open_results(const ExperimentSpec& spec, const RunContext& ctx, RunResult& result) {
  const RunOptions& opt = ctx.options();
  result.run_id = spec.name + "-" + timestamp_for_name();
  result.folder = opt.output_dir.empty() ? spec.output + "/" + result.run_id : opt.output_dir;
  if (!opt.output_dir.empty()) result.run_id = fs::path(opt.output_dir).filename().string();
  fs::create_directories(result.folder);
  ctx.log("results in " + result.folder);
}

void write_timeline(const std::string& path, const std::vector<Sample>& samples, const std::string& run,
                    const std::function<int(int64_t)>& iteration) {
  CsvWriter w(path);
  auto cols = sample_csv_columns();
  cols.push_back("run");
  cols.push_back("iteration");
  w.header(cols);
  for (const auto& s : samples) {
    auto f = sample_csv_fields(s);
    f.push_back(run);
    f.push_back(std::to_string(iteration(s.t_ns)));
    w.row(f);
  }
  w.close();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();  // the buffered tail reaches the file (or fails) here, not in the destructor
  if (!out) throw Error("cannot write " + path);
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
