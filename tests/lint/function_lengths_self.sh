#!/bin/sh
# The function-length scan must find exactly the one long function of its sample (exit 1, the
# function named with its length and line), or the lint test that uses it could never fail.
cd "$1" || exit 2
out=$(scripts/function-lengths 6 tests/lint/function_lengths_sample.cpp)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1"; exit 1; }
echo "$out" | grep -q '^    9 lines  tests/lint/function_lengths_sample.cpp:5 ' || { echo "FAIL: long_one not reported"; exit 1; }
echo "$out" | grep -q ', 1 function(s) over 6 lines$' || { echo "FAIL: not exactly one function"; exit 1; }
# --tree: a new top-level folder is scanned without being named; tests/ and build folders are not.
tree=$(mktemp -d "${TMPDIR:-/var/tmp}/function-lengths.XXXXXX") || exit 2
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/newlib/src" "$tree/tests" "$tree/build" "$tree/.hidden"
for d in newlib/src tests build .hidden; do cp tests/lint/function_lengths_sample.cpp "$tree/$d/"; done
touch "$tree/build/CMakeCache.txt"
out=$(scripts/function-lengths 6 --tree "$tree")
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: --tree exit $rc, want 1"; exit 1; }
echo "$out" | grep -q "^    9 lines  $tree/newlib/src/function_lengths_sample.cpp:5 " ||
  { echo "FAIL: --tree missed the unnamed folder"; exit 1; }
echo "$out" | grep -q ', 1 function(s) over 6 lines$' || { echo "FAIL: --tree scanned tests/, build/ or .hidden/"; exit 1; }
echo "ok: the scan reports long_one only, and --tree finds it in a folder nobody named"
