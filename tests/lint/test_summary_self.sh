#!/bin/sh
# scripts/test-summary must count a Catch2 binary whose closing line the JUnit file cut off (ctest
# keeps only the first 4 KiB of a passed test's output there): it reads the whole output from
# LastTest.log beside it. A build tree of two tests, one whose JUnit output is cut.
set -u
cd "$1" || exit 2
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/Testing/Temporary"
cat > "$t/ctest-junit.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="2" failures="0" time="3">
  <testcase name="short_one" classname="short_one" time="1" status="run">
    <system-out>All tests passed (7 assertions in 2 test cases)
</system-out>
  </testcase>
  <testcase name="long_one" classname="long_one" time="2" status="run">
    <system-out>lots of output...
[This part of the test output was removed since it exceeds the threshold of 4096 bytes.]
</system-out>
  </testcase>
</testsuite>
XML
cat > "$t/Testing/Temporary/LastTest.log" <<'LOG'
1/2 Testing: short_one
1/2 Test: short_one
Command: "short_one"
Output:
----------------------------------------------------------
All tests passed (7 assertions in 2 test cases)
<end of output>
Test time =   1.00 sec
2/2 Testing: long_one
2/2 Test: long_one
Command: "long_one"
Output:
----------------------------------------------------------
lots of output
===============================================================================
All tests passed (1234 assertions in 5 test cases)

<end of output>
Test time =   2.00 sec
LOG
out=$(scripts/test-summary "$t/ctest-junit.xml")
echo "$out"
echo "$out" | grep -q 'Catch2: 7 test cases, 1241 assertions (0 failed cases)' ||
  { echo "FAIL: want 7 test cases and 1241 assertions (the cut-off closing line counted from LastTest.log)"; exit 1; }
rm "$t/Testing/Temporary/LastTest.log"
out=$(scripts/test-summary "$t/ctest-junit.xml")
echo "$out" | grep -q 'Catch2: 2 test cases, 7 assertions' ||
  { echo "FAIL: without LastTest.log, want the JUnit file's 2 test cases and 7 assertions"; exit 1; }
echo "ok: the cut-off binary is counted from LastTest.log"
