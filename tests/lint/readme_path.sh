#!/bin/bash
# The README's no-lab path does what the README says: the block after the marker
# "<!-- readme-path: no-lab commands" runs, as user nobody, in a copy of what it needs (the
# three programs, the plot script, the sample; a checkout under /root is mode 0700 to nobody) on
# a private loopback (its own network namespace: port 3082 is nobody else's), and what it prints
# matches the block after "<!-- readme-path: no-lab output".
#
# How lines match: the same number of lines, in order, each equal once every number with a
# decimal point (latencies in ms, which differ from run to run) is replaced by '#' and runs of
# blanks by one blank (columns widen with the numbers). Integers (counts, ports, rows) must
# match exactly, so a bench that ran fewer toggles or an analysis that found other rows fails.
#
#   tests/lint/readme_path.sh SOURCE_DIR BUILD_DIR [--show]   (--show: print the run's output)
set -u
src=$1 build=$2 show=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) == 0 ]] || fail "needs root: it runs the README's commands as user nobody in a network namespace of its own"

block() {  # the fenced block after the marker line $1 in README.md
  awk -v m="$1" 'index($0, m) == 1 { found = 1; next }
                 found && /^```/ { if (inside) exit; inside = 1; next }
                 inside { print }' "$src/README.md"
}
normalise() { sed -E 's/[0-9]+\.[0-9]+/#/g; s/[[:blank:]]+/ /g; s/ $//'; }

scratch=$(mktemp -d) || exit 2
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
tree=$scratch/tree
mkdir -p "$tree/build/bin" "$tree/build/share/ocslab" "$tree/experiments" "$scratch/home"
block "<!-- readme-path: no-lab commands" > "$scratch/commands.sh"
block "<!-- readme-path: no-lab output" > "$scratch/expected"
[[ -s $scratch/commands.sh ]] || fail "README.md has no block after '<!-- readme-path: no-lab commands'"
[[ -s $scratch/expected ]] || fail "README.md has no block after '<!-- readme-path: no-lab output'"
for p in ocsctl ocslab ocslab-agent; do cp "$build/bin/$p" "$tree/build/bin/" || fail "no $build/bin/$p"; done
# Where an ocslab in build/bin looks first for its plot script (../share/ocslab).
cp "$src/experiments/plots/ocslab_plot.py" "$tree/build/share/ocslab/"
cp -r "$src/experiments/samples" "$tree/experiments/"
chmod -R a+rX "$scratch"
chown -R nobody "$tree" "$scratch/home"

# load-bound: 60 s for a path that takes about 2 s; a hung emulator or bench fails here.
timeout 60 unshare --net bash -c '
  ip link set lo up || exit 2
  cd "$1" && exec setpriv --reuid nobody --regid nogroup --clear-groups --reset-env \
    env HOME="$2" PATH=/usr/local/bin:/usr/bin:/bin bash -e "$3"' _ "$tree" "$scratch/home" \
  "$scratch/commands.sh" > "$scratch/actual" 2>&1
rc=$?
[[ $show == --show ]] && cat "$scratch/actual"
[[ $rc == 0 ]] || { cat "$scratch/actual"; fail "the no-lab commands exited $rc"; }
[[ -s $tree/results/no-lab/sample/timeline.png && -s $tree/results/no-lab/sample/cdf.png ]] \
  || fail "ocslab plot drew no timeline.png and cdf.png under results/no-lab/sample"
if ! diff -u <(normalise < "$scratch/expected") <(normalise < "$scratch/actual") > "$scratch/diff"; then
  cat "$scratch/diff"
  fail "the no-lab path printed something else than README.md shows (lines after normalising: - README, + run)"
fi
echo "ok: the README's no-lab path printed what it shows ($(wc -l < "$scratch/expected") lines)"
