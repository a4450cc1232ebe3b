#!/bin/sh
# The hygiene check must fail on a planted leftover, naming it, and pass when nothing was added,
# or the fixture hygiene_after could never fail. It runs on a fake root (OCSLAB_HYGIENE_ROOT) so
# the suite's own record is not touched.
check=$1/tests/hygiene/leftovers.py
work=$(mktemp -d "${TMPDIR:-/tmp}/ocslab-hygiene-self-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
export OCSLAB_HYGIENE_ROOT="$work/root"
unset OCSLAB_KEEP_TEST_DIRS
mkdir -p "$work/root/tmp/ocslab-there-before" "$work/root/var/spool/ocslab-agent" "$work/root/netns" || exit 2
python3 "$check" record "$work/state.json" || { echo "FAIL: record"; exit 1; }
mkdir "$work/root/tmp/unrelated-folder"  # not ocslab-named: not counted
python3 "$check" check "$work/state.json" || { echo "FAIL: nothing ocslab-named was added, yet the check failed"; exit 1; }
mkdir "$work/root/tmp/ocslab-phase-results-planted"
touch "$work/root/var/spool/ocslab-agent/capture-planted.jsonl"
touch "$work/root/netns/ocslab-t-planted"
out=$(python3 "$check" check "$work/state.json")
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1"; exit 1; }
for want in "file or folder $work/root/tmp/ocslab-phase-results-planted" \
            "spool entry $work/root/var/spool/ocslab-agent/capture-planted.jsonl" \
            "network namespace ocslab-t-planted"; do
  echo "$out" | grep -qF "left after the tests: $want" || { echo "FAIL: not named: $want"; exit 1; }
done
echo "$out" | grep -q "ocslab-there-before" && { echo "FAIL: a thing there before the tests was named"; exit 1; }
echo "$out" | grep -q "3 ocslab-named thing(s)" || { echo "FAIL: not exactly the three planted things"; exit 1; }
echo "ok: the hygiene check names the three planted leftovers only"
