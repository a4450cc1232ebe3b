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
echo "ok: the scan reports long_one only"
