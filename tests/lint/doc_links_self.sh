#!/bin/sh
# scripts/check-doc-links must fail on a link to a missing file and on an anchor that is no
# heading of its target, and pass links to headings with code, punctuation and repeats, links to
# folders, links inside code (ignored) and absolute URLs. A scratch docs folder of three files.
set -u
src=$1
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/docs/sub"
cat > "$t/docs/target.md" <<'MD'
# Target
## Host-based forwarding (`forwarding:`)
## Notes
## Notes
```sh
# not a heading
```
MD
cat > "$t/docs/good.md" <<'MD'
See [fwd](target.md#host-based-forwarding-forwarding), [second notes](target.md#notes-1),
[the folder](sub), [self](#good), [web](https://example.com/x.md) and `[code](missing.md)`.
# Good
```
[fenced](missing.md)
```
MD
cat > "$t/docs/bad.md" <<'MD'
A [missing file](nowhere.md) and a [missing heading](target.md#not-a-heading) and
a [fenced one](target.md#not-a-heading-either).
MD
fail=0
out=$("$src/scripts/check-doc-links" "$t/docs/good.md" 2>&1) || { echo "FAIL: good links refused: $out"; fail=1; }
out=$("$src/scripts/check-doc-links" "$t/docs/bad.md" 2>&1)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: bad links: exit $rc, want 1"; fail=1; }
for want in "bad.md:1: nowhere.md: no such file" "bad.md:1: target.md#not-a-heading: no heading" \
            "bad.md:2: target.md#not-a-heading-either: no heading" "3 broken link(s)"; do
  case $out in *"$want"*) ;; *) echo "FAIL: missing '$want' in: $out"; fail=1 ;; esac
done
[ $fail -eq 0 ] && echo "check-doc-links self-test: ok"
exit $fail
