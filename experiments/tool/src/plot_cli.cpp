#include "ocslab/cli/plot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "commands.h"
#include "ocslab/common/suggest.h"
#include "ocslab/cli/ocslab_cli.h"
#include "ocslab/common/error.h"
#include "ocslab/common/process.h"

namespace fs = std::filesystem;

namespace ocslab::cli {

namespace {

constexpr const char* kPlotHelp = R"(ocslab plot - draw the figures of a results folder

Usage: ocslab plot FOLDER [--iteration N] [--format png|svg] [--describe] [--dark-dbm DBM]

Writes into FOLDER (from its timeline.csv and breakdown.csv):
  timeline.png  one reconfiguration: one panel per host, one 1/0 step lane per layer
                (control = the switch command from issue to ack, light, firmware, carrier,
                rdma with its gap), x = ms since the command was issued, every edge marked,
                carrier/RDMA lanes that never came back crossed in red; at most 1200 px high,
                more than 16 hosts on pages of 16: timeline-1.png, timeline-2.png, ...
  cdf.png       per-layer latency CDFs (switching, firmware, carrier, rdma, total) over the
                breakdown rows with status ok; log x when they span more than two decades
  phase.png     a phase-workload folder (phase-steps.csv): per step, the step time split into
                compute, communication and fabric wait, one bar per phase mode (Opus Fig. 9(d))
  windows.png   (windows.csv) the CDF of the groups' idle windows per run, the switching time
                marked (Opus Fig. 4)
  sweep.png     (sweep.csv) step time against switching time per mode, native as a line, the
                estimate T_native + N_reconfig x T_switch dashed beside each mode
  survival.png  (survival_matrix.csv, written by `ocslab analyze` for the outages experiment)
                per queue-pair setting and planned outage length, the share of rows that
                survived (green) or errored (red); each setting's predicted boundary a bar
                between the columns, Soft-RoCE's dashed
  firmware_study.png  (firmware_study.csv, written by `ocslab analyze` for a firmware sweep)
                firmware link-up per NIC model (median, min-max) against the reconfiguration
                interval, the rows that never came up noted, the Opus figures (about 6 s with
                auto-negotiation, 3 s without, up to 10 s under rapid reconfigurations) beside
  A phase-workload run with probes also gets timeline.png and cdf.png; its timeline.png spans
  the step of the chosen reconfiguration, with one lane per rank (ops and fabric waits) under
  the hosts' lanes (Opus Fig. 9(b-d)).

Options:
  --iteration N     the reconfiguration to draw (default: the one whose total_ms is the median
                    of the ok rows, else iteration 1)
  --format FMT      png (default) or svg
  --describe        also print, as JSON on stdout, what was drawn: the iteration, the issue
                    time, each host's lanes and edges in ms since issue, the timeline's pages
                    (host labels, failed-lane markers), the CDF series, the series' colours
  --dark-dbm DBM    Rx power below this counts as dark when a host only has rx_power (-30)

Environment:
  OCSLAB_PYTHON       the interpreter (default /usr/bin/python3, else python3 from PATH)
  OCSLAB_PLOT_SCRIPT  the script (default ../share/ocslab/ocslab_plot.py next to the
                      executable, else experiments/plots/ocslab_plot.py of the source tree)

Exit codes (the table in ocslab --help): 0 drawn; 1 bad command line; 2 missing or malformed
input (the message names the file, or the iteration that is not there); 3 python3 or matplotlib
missing (scripts/install-deps installs python3-matplotlib); 5 the plot script failed.

Reading the figures: docs/experiments.md, "Reading the plots".
)";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::string plot_script_path() {
  if (const char* env = std::getenv("OCSLAB_PLOT_SCRIPT"); env && *env) {
    if (!is_file(env)) throw Error(std::string("OCSLAB_PLOT_SCRIPT=") + env + ": no such file");
    return env;
  }
  std::vector<fs::path> tried;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back((exe.parent_path() / ".." / "share" / "ocslab" / "ocslab_plot.py").lexically_normal());
  tried.push_back(fs::path(OCSLAB_SOURCE_DIR) / "experiments" / "plots" / "ocslab_plot.py");
  for (const auto& p : tried) {
    if (is_file(p)) return p.string();
  }
  std::string where;
  for (const auto& p : tried) where += (where.empty() ? "" : ", ") + p.string();
  throw Error("cannot find the plotting script ocslab_plot.py (looked in " + where + "; set OCSLAB_PLOT_SCRIPT)");
}

std::string plot_python() {
  if (const char* env = std::getenv("OCSLAB_PYTHON"); env && *env) return env;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

int run_plot_script(const std::vector<std::string>& script_args, std::ostream& out, std::ostream& err) {
  std::string python = plot_python();
  std::vector<std::string> argv = {python, plot_script_path()};
  argv.insert(argv.end(), script_args.begin(), script_args.end());
  ProgramResult r = run_program_status(argv);
  out << r.out;
  err << r.err;
  if (r.status == 127) {
    err << "ocslab plot: cannot run " << python << " (install python3 and python3-matplotlib: scripts/install-deps)\n";
    return kExitRefused;
  }
  if (r.signal != 0) {
    err << "ocslab plot: " << python << " was killed by signal " << r.signal << "\n";
    return kExitFailed;
  }
  return r.status;
}

int draw_plots(const std::string& folder, std::ostream& err) {
  std::ostringstream ignored;
  try {
    return run_plot_script({folder}, ignored, err);
  } catch (const std::exception& e) {
    err << "ocslab plot: " << e.what() << "\n";
    return kExitFailed;
  }
}

int run_plot(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Checked here as well as in the script so a typo is exit 1 with our usage line, and so the
  // script is not looked for when the command line is wrong.
  std::vector<std::string> forward;
  std::string folder;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--help" || w == "-h") {
      out << kPlotHelp;
      return kExitOk;
    }
    std::string name = w, value;
    bool has_value = false;
    if (auto eq = w.find('='); w.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = w.substr(0, eq);
      value = w.substr(eq + 1);
      has_value = true;
    }
    if (name == "--describe") {
      if (has_value) throw UsageError("--describe takes no value");
      forward.push_back(name);
    } else if (name == "--iteration" || name == "--format" || name == "--dark-dbm") {
      if (!has_value) {
        if (i + 1 >= args.size()) throw UsageError(name + " needs a value (ocslab plot --help)");
        value = args[++i];
      }
      if (name == "--iteration") {
        size_t used = 0;
        long n = -1;
        try {
          n = std::stol(value, &used);
        } catch (const std::exception&) {
        }
        if (used != value.size() || n < 0)
          throw BadValue("--iteration needs a reconfiguration number, got '" + value + "' (ocslab plot --help)");
      } else if (name == "--format" && value != "png" && value != "svg") {
        throw BadValue("--format is png or svg, got '" + value + "' (ocslab plot --help)");
      } else if (name == "--dark-dbm") {
        size_t used = 0;
        try {
          (void)std::stod(value, &used);
        } catch (const std::exception&) {
        }
        if (used == 0 || used != value.size())
          throw BadValue("--dark-dbm needs a number of dBm, got '" + value + "' (ocslab plot --help)");
      }
      forward.push_back(name);
      forward.push_back(value);
    } else if (w.size() > 1 && w[0] == '-') {
      throw unknown_word("option", w, options_in_text(kPlotHelp), "ocslab plot");
    } else if (folder.empty()) {
      folder = w;
    } else {
      throw UsageError(fmt::format("one results folder at a time, got '{}' and '{}'", folder, w));
    }
  }
  if (folder.empty()) throw UsageError("usage: ocslab plot FOLDER [--iteration N] [--format png|svg] [--describe]");
  forward.insert(forward.begin(), folder);
  return run_plot_script(forward, out, err);
}

}  // namespace ocslab::cli
