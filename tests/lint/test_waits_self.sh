#!/bin/sh
# The wait lint (scripts/test-waits) must pass on the tests as they are and fail on a planted
# sleep_for without a reason, naming its file:line, or the lint entry could never fail. It scans
# a copy, so the tree itself is never touched.
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/ocslab-test-waits-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
cp -r "$src/tests" "$work/tests" || exit 2
cd "$work" || exit 2
"$src/scripts/test-waits" tests >/dev/null || { echo "FAIL: the copy of the tests does not pass before the plant"; exit 1; }
call=sleep_
call=${call}for  # spelt in two, or the lint would find the plant in this script
cat >tests/unit/planted_wait_test.cpp <<CPP
#include <chrono>
#include <thread>
void planted() {
  // load-safe: this reason covers the first wait only
  std::this_thread::${call}(std::chrono::milliseconds(1));
  std::this_thread::${call}(std::chrono::milliseconds(5));  // a comment, but no reason
}
CPP
out=$("$src/scripts/test-waits" tests)
rc=$?
echo "$out" | tail -3
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1"; exit 1; }
echo "$out" | grep -q '^tests/unit/planted_wait_test.cpp:6: sleep_for without' || { echo "FAIL: the planted wait (line 6) not named"; exit 1; }
echo "$out" | grep -q 'planted_wait_test.cpp:5' && { echo "FAIL: the explained wait (line 5) reported"; exit 1; }
echo "$out" | grep -q ', 1 without a reason,' || { echo "FAIL: not exactly one wait without a reason"; exit 1; }
echo "ok: the lint names the planted sleep_for only"
