#!/bin/sh
# The guarantees lint (scripts/check-guarantees) must pass on docs/guarantees.md as it is and fail
# on each kind of promise without a test, naming its line: a bullet, a table row whose "shown by"
# cell names an entry that does not exist, and a table without a "shown by" column that no
# command measured. It checks a copy, so the tree itself is never touched.
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/ocslab-guarantees-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/docs" && cp -r "$src/tests" "$work/tests" && cp "$src/Makefile" "$work/" && cp "$src/docs/guarantees.md" "$work/docs/" || exit 2
"$src/scripts/check-guarantees" "$work" >/dev/null || { echo "FAIL: the copy does not pass before the plant"; exit 1; }
n=$(wc -l <"$work/docs/guarantees.md")
cat >>"$work/docs/guarantees.md" <<'MD'

## Planted

- A promise with code in it (`ocslab run`) but no test.
- A promise shown by a test (`unit_runner`, "a case").

| fault | what survives | shown by |
|---|---|---|
| planted | all of it | `unit_no_such_entry` |

A measurement that says nowhere how it was taken:

| run | rows |
|---|---|
| 1 minute | 5 |
MD
out=$("$src/scripts/check-guarantees" "$work")
rc=$?
echo "$out" | tail -4
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1"; exit 1; }
echo "$out" | grep -q "^docs/guarantees.md:$((n + 4)): a bullet that names no test" || { echo "FAIL: the bullet (line $((n + 4))) not named"; exit 1; }
echo "$out" | grep -q "^docs/guarantees.md:$((n + 5)):" && { echo "FAIL: the bullet with a test (line $((n + 5))) reported"; exit 1; }
echo "$out" | grep -q "^docs/guarantees.md:$((n + 9)): a row that names no test" || { echo "FAIL: the row (line $((n + 9))) not named"; exit 1; }
echo "$out" | grep -q "^docs/guarantees.md:$((n + 13)): a table without a \"shown by\" column" || { echo "FAIL: the unmeasured table (line $((n + 13))) not named"; exit 1; }
echo "$out" | grep -q ", 3 without a test$" || { echo "FAIL: not exactly three findings"; exit 1; }
echo "ok: the lint names the planted bullet, row and table only"
