// The figures of a results folder (timeline.png, cdf.png), drawn by experiments/plots/ocslab_plot.py
// under python3 + matplotlib: `ocslab plot` is a front for it, and the runner calls draw_plots
// after a run so a results folder always comes with its figures.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ocslab::cli {

// The plotting script: $OCSLAB_PLOT_SCRIPT, else <executable>/../share/ocslab/ocslab_plot.py,
// else the source tree's copy. Throws Error naming every place it looked when none exists.
std::string plot_script_path();

// The interpreter that runs it: $OCSLAB_PYTHON, else /usr/bin/python3 (where the Debian package
// python3-matplotlib installs), else python3 from PATH.
std::string plot_python();

// Runs the script with `script_args` (FOLDER and its options), copies its output to out/err and
// returns its exit code (0 ok, 1 usage, 2 bad input, 3 no matplotlib or no python).
int run_plot_script(const std::vector<std::string>& script_args, std::ostream& out, std::ostream& err);

// Draws timeline.png and cdf.png into `folder` (default iteration, png); what went wrong goes to
// err. Returns the script's exit code; never throws for a folder it cannot plot.
int draw_plots(const std::string& folder, std::ostream& err);

}  // namespace ocslab::cli
