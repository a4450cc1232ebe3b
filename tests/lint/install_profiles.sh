#!/bin/sh
# scripts/install-deps' profiles (docs/install.md): the runtime profile, what a lab controller
# installs, holds no test-lab or toolchain package (slurm, munge, ansible, qemu, clang, chrony);
# test, the default and what CI installs, holds every package of every other profile; and as a
# user other than root the script names only the packages missing, installs nothing and exits 1,
# or is silent when nothing is missing. dpkg-query is replaced by one that reports the packages
# listed in $t/installed, so the answer does not depend on this machine.
set -u
src=$1
deps=$src/scripts/install-deps
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
chmod 755 "$t"
fail=0

for p in runtime build vlab test; do
  "$deps" "$p" --print > "$t/$p" || { echo "FAIL: install-deps $p --print: exit $?"; fail=1; }
  [ -s "$t/$p" ] || { echo "FAIL: profile $p lists nothing"; fail=1; }
done
"$deps" --print > "$t/default"
cmp -s "$t/default" "$t/test" || { echo "FAIL: the default is not the test profile"; fail=1; }

bad=$(grep -E 'slurm|munge|ansible|qemu|clang|chrony' "$t/runtime")
[ -z "$bad" ] || { echo "FAIL: runtime lists test-lab or toolchain packages:" $bad; fail=1; }

for p in runtime build vlab; do
  sort "$t/$p" > "$t/$p.sorted"
  extra=$(sort "$t/test" | comm -13 - "$t/$p.sorted")
  [ -z "$extra" ] || { echo "FAIL: test lacks packages of $p:" $extra; fail=1; }
done
# Combined profiles are the union, each package once.
"$deps" runtime build --print > "$t/both"
[ "$(sort "$t/both" | uniq -d)" = "" ] || { echo "FAIL: runtime build lists a package twice"; fail=1; }
[ "$(sort -u "$t/runtime" "$t/build")" = "$(sort "$t/both")" ] || { echo "FAIL: runtime build is not the union"; fail=1; }

out=$("$deps" no-such-profile 2>&1)
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: unknown profile: exit $rc, want 2"; fail=1; }
case $out in *"unknown profile or option 'no-such-profile'"*) ;; *) echo "FAIL: unknown profile not named: $out"; fail=1 ;; esac

# A dpkg-query that knows only what $t/installed lists.
mkdir "$t/bin"
cat > "$t/bin/dpkg-query" <<EOF
#!/bin/sh
for a; do p=\$a; done
grep -qx "\$p" "$t/installed" && printf 'install ok installed'
exit 0
EOF
chmod 755 "$t/bin/dpkg-query"
as_user() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=65534 --regid=65534 --clear-groups env PATH="$t/bin:$PATH" "$@"
  else
    env PATH="$t/bin:$PATH" "$@"
  fi
}
cp "$t/build" "$t/installed"
chmod 644 "$t/installed"
# The user runs a copy: a checkout in /root (mode 0700) is not theirs to reach.
cp "$deps" "$t/install-deps" && chmod 755 "$t/install-deps" || exit 2
udeps=$t/install-deps
out=$(as_user "$udeps" build 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ]; then
  echo "FAIL: build profile present: exit $rc, output '$out', want 0 and nothing"; fail=1
fi
grep -vx -e cmake -e catch2 "$t/build" > "$t/installed"
out=$(as_user "$udeps" build 2>&1)
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: two build packages missing, not root: exit $rc, want 1"; fail=1; }
case $out in *"build: 2 package(s) missing: cmake catch2"*"sudo scripts/install-deps build"*) ;;
  *) echo "FAIL: the missing packages are not named alone: $out"; fail=1 ;; esac

[ $fail -eq 0 ] && echo "install-deps profiles: ok ($(wc -l < "$t/runtime") runtime, $(wc -l < "$t/build") build, $(wc -l < "$t/vlab") vlab, $(wc -l < "$t/test") test)"
exit $fail
