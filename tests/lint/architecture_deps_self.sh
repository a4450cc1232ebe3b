#!/bin/sh
# scripts/check-architecture-deps passes docs/architecture.md as it is and fails, naming file:line
# and the library, on a scratch copy whose folder table lost a link the CMake has (runner without
# analysis, as the page once was), names a link the CMake lacks, and names a target that does not
# exist.
set -u
src=$1
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
doc=$t/architecture.md
fail=0
out=$("$src/scripts/check-architecture-deps" --root "$src" "$src/docs/architecture.md" 2>&1) ||
  { echo "FAIL: the page as it is: $out"; fail=1; }
runner=$(grep -n '^| `experiments/runner/` |' "$src/docs/architecture.md" | cut -d: -f1)
phase=$(grep -n '^| `experiments/phase/` |' "$src/docs/architecture.md" | cut -d: -f1)
vlab=$(grep -n '^| `experiments/vlab/` |' "$src/docs/architecture.md" | cut -d: -f1)
sed -e "${runner}s/ workloads, analysis, common;/ workloads, common;/" \
    -e "${phase}s/| ocs, common;/| ocs, vlab, common;/" \
    -e "${vlab}s/| \`ocslab_vlab\` |/| \`ocslab_vlab_lab\` |/" "$src/docs/architecture.md" > "$doc"
out=$("$src/scripts/check-architecture-deps" --root "$src" "$doc" 2>&1)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: changed table: exit $rc, want 1: $out"; fail=1; }
for want in "architecture.md:$runner: \`ocslab_runner\`: linked but not named: analysis" \
            "architecture.md:$phase: \`ocslab_phase\`: not linked: vlab" \
            "architecture.md:$vlab: \`ocslab_vlab_lab\`: no ocslab_library(NAME ocslab_vlab_lab)" \
            "3 differing from CMake"; do
  case $out in *"$want"*) ;; *) echo "FAIL: missing '$want' in: $out"; fail=1 ;; esac
done
[ $fail -eq 0 ] && echo "check-architecture-deps self-test: ok"
exit $fail
