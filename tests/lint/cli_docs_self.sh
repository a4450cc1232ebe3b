#!/bin/sh
# The check of lint_cli_docs must fail, naming the program, the command and the option, when a
# page or a completion misses an option or a value the option's help lists, when a command's
# completion offers an option the command does not take, when the page has no EXIT STATUS or (for a program whose
# help names environment variables) no ENVIRONMENT section, and when `man` warns about a page; and pass on the
# pages the build made. Works on copies of ocsctl's files.
# Usage: cli_docs_self.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
check="$src/scripts/cli-docs check $build/bin/ocsctl 1"
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
fail=0
expect() {  # expect NAME WANT_RC PATTERN: the last check's exit code and a line of its output
  if [ "$rc" -ne "$2" ] || ! grep -qF -- "$3" "$t/out"; then
    echo "FAILED: $1: exit $rc (want $2), output:"
    cat "$t/out"
    fail=1
  fi
}
fresh() {
  rm -rf "$t/man" "$t/completion"
  cp -r "$build/man" "$t/man" && cp -r "$build/completion" "$t/completion" || exit 2
}

fresh
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "the build's own files" 0 "ocsctl: man page and completion cover every command and option"

fresh  # watch-power's --interval-ms taken out of the page (its lines in both sections)
grep -v 'interval\\-ms' "$build/man/ocsctl.1" > "$t/man/ocsctl.1"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "option missing from the page" 1 "ocsctl watch-power: option --interval-ms is missing from the man page"

fresh  # bench's --toggles no longer completed
sed 's/ --toggles / /g' "$build/completion/ocsctl" > "$t/completion/ocsctl"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "option missing from the completion" 1 "ocsctl bench: option --toggles is not completed by"

fresh  # a command no longer completed
sed 's/ watch-power / /' "$build/completion/ocsctl" > "$t/completion/ocsctl"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "command missing from the completion" 1 "ocsctl: command 'watch-power' is not completed by"

fresh  # watch-power offered bench's --pairs (every command offered the program's 33 options once)
sed 's/^\(    "watch-power") .*opts="\)/\1--pairs /' "$build/completion/ocsctl" > "$t/completion/ocsctl"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "an option of another command completed" 1 "ocsctl watch-power: the completion offers --pairs, which 'ocsctl watch-power' does not take"

fresh  # a preset no longer completed as --preset's value (emulate lists them)
sed 's/ rotor / /g' "$build/completion/ocsctl" > "$t/completion/ocsctl"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "a value missing from the completion" 1 "ocsctl emulate: value 'rotor' of --preset is not completed by"

fresh  # a request groff does not know: man warns
sed 's/^\.SH VERSION$/.SH VERSION\n.XX not a macro/' "$build/man/ocsctl.1" > "$t/man/ocsctl.1"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "a page man warns about" 1 "warned"

fresh  # the EXIT STATUS and ENVIRONMENT sections taken out (from their heading to the next one)
awk '/^\.SH (EXIT STATUS|ENVIRONMENT)$/ {skip=1; next} /^\.SH / {skip=0} !skip' "$build/man/ocsctl.1" > "$t/man/ocsctl.1"
$check "$t/man" "$t/completion" > "$t/out" 2>&1; rc=$?
expect "no EXIT STATUS section" 1 "ocsctl: the man page $t/man/ocsctl.1 has no EXIT STATUS section"
expect "no ENVIRONMENT section" 1 "has no ENVIRONMENT section"

exit $fail
