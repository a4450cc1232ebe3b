#!/bin/sh
# scripts/runner-layers must fail on an include from a lower layer to a higher one (a made-up
# one planted in a scratch copy of the runner: the leaf header phase_figures.h including the
# top-level runner.h), naming the file, the include and both layers; and on a runner file the
# layers do not place. The unchanged copy passes, so the failures are the planted ones.
set -u
src=$1
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/runner"
cp -r "$src/experiments/runner/include" "$src/experiments/runner/src" "$src/experiments/runner/layers.txt" "$t/runner/"
check() { "$src/scripts/runner-layers" "$t/runner/layers.txt" "$t/runner"; }
out=$(check) || { echo "$out"; echo "FAIL: the unchanged copy does not pass"; exit 1; }

h="$t/runner/include/ocslab/runner/phase_figures.h"
sed -i 's|#include "ocslab/phase/controller.h"|#include "ocslab/runner/runner.h"\n&|' "$h"
out=$(check)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc with an upward include, want 1"; exit 1; }
echo "$out" | grep -q 'phase_figures.h:[0-9]*: phase_figures.h (layer leaf) includes runner.h (layer api)' ||
  { echo "FAIL: the upward include is not named"; exit 1; }
[ "$(echo "$out" | grep -c 'from a lower layer to a higher one')" -eq 1 ] || { echo "FAIL: not exactly one"; exit 1; }

sed -i '/ocslab\/runner\/runner.h/d' "$h"
echo '// unplaced' > "$t/runner/src/unplaced_part.cpp"
out=$(check)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc with an unplaced file, want 1"; exit 1; }
echo "$out" | grep -q 'unplaced_part.cpp: not placed in any layer' || { echo "FAIL: the unplaced file is not named"; exit 1; }
echo "ok: the lint names the upward include and the unplaced file"
