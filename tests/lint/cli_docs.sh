#!/bin/sh
# Every program's man page and bash completion (build/man, build/completion, made by
# scripts/cli-docs from --help) name every command and every option its --help and each
# command's --help list, and `man` renders each page without a warning.
# Usage: cli_docs.sh SOURCE_DIR BUILD_DIR PROGRAM:SECTION...
set -u
src=$1 build=$2
shift 2
[ $# -gt 0 ] || { echo "cli_docs.sh: no program given" >&2; exit 2; }
rc=0
for entry in "$@"; do
  program=${entry%%:*} section=${entry##*:}
  "$src/scripts/cli-docs" check "$build/bin/$program" "$section" "$build/man" "$build/completion" || rc=1
done
exit $rc
