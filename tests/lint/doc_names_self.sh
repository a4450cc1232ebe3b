#!/bin/sh
# scripts/check-doc-names must fail on names of code that exist nowhere in the tree (a function,
# a type, a member, a source file) planted in a scratch copy of docs/architecture.md, naming
# file:line and the name, and must let through, by their shape, what is no name of ocslab's code:
# options, environment variables, command lines, dotted keys, placeholders, system headers, links
# to other projects, reference entries, fenced blocks. The planted names carry this shell's pid,
# so that no file of the tree (this one included) holds them.
set -u
src=$1
build=${2:-}
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
doc=$t/architecture.md
cp "$src/docs/architecture.md" "$doc" || exit 2
n=$(wc -l < "$doc")
fn=no_such_function_$$
cat >> "$doc" <<MD

The merge calls \`${fn}()\` first,
then \`NoSuchRunner$$\` and \`ReconfigurationRun::no_such_step_$$\`,
and \`experiments/runner/src/no_such_file_$$.cpp\` holds them.
Shapes that are no names of code: \`--no-such-flag-$$\`, \`OCSLAB_NO_SUCH_$$\`, \`ls -l no_such_$$\`,
\`lab.no_such_key_$$\`, \`RESULTS/no_such_$$/x.yaml\`, \`<no/such_header_$$.h>\`,
[\`no_such_kernel_fn_$$\`](https://example.org/no_such_kernel_fn_$$), a span over a
line break: \`no_such
words\`, and words around underscores in prose: no_such_prose_$$.
- [ref-$$] Linux source \`drivers/no_such_$$.c\` (\`no_such_cited_fn_$$\`,
  \`no_such_cited_too_$$\`).
\`\`\`
no_such_fenced_$$()
\`\`\`
MD
fail=0
args="--root $src"
[ -n "$build" ] && args="$args --build $build"
# What the page already lacks is lint_doc_names' business: the planted names come on top of it.
# shellcheck disable=SC2086
before=$("$src/scripts/check-doc-names" $args "$src/docs/architecture.md" 2>&1 | sed -n 's/.*, \([0-9]*\) name(s) not in the tree$/\1/p')
[ -n "$before" ] || { echo "FAIL: no count for the page as it is"; exit 1; }
# shellcheck disable=SC2086
out=$("$src/scripts/check-doc-names" $args "$doc" 2>&1)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: planted names: exit $rc, want 1: $out"; fail=1; }
for want in "architecture.md:$((n + 2)): \`${fn}()\`: no file of the tree holds this name" \
            "architecture.md:$((n + 3)): \`NoSuchRunner$$\`: no file of the tree holds this name" \
            "architecture.md:$((n + 3)): \`ReconfigurationRun::no_such_step_$$\`: no file of the tree holds no_such_step_$$" \
            "architecture.md:$((n + 4)): \`experiments/runner/src/no_such_file_$$.cpp\`: no such file in the tree" \
            "$((before + 4)) name(s) not in the tree"; do
  case $out in *"$want"*) ;; *) echo "FAIL: missing '$want' in: $out"; fail=1 ;; esac
done
# A member that exists, but in no file that declares its class, is no member of it (the name is
# put together here so that this file does not hold it as written).
printf 'See `%s::%s`.\n' Agent merge_capture > "$t/member.md"
# shellcheck disable=SC2086
out=$("$src/scripts/check-doc-names" $args "$t/member.md" 2>&1)
q=::
case $out in *"member.md:1: \`Agent${q}merge_capture\`: no file that declares Agent holds merge_capture"*) ;;
  *) echo "FAIL: a member of another class passed: $out"; fail=1 ;; esac
[ $fail -eq 0 ] && echo "check-doc-names self-test: ok"
exit $fail
