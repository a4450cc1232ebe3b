#!/usr/bin/env bash
# integration_install: `cmake --install` of the release build into a scratch prefix has every
# file docs/install.md promises and none of the build-tree-only ones; each installed public
# header compiles on its own; the example program of docs/ocsctl.md (exactly the text between its
# markers) builds out of tree against that prefix with find_package(ocslab) and with pkg-config,
# and both binaries list the circuits the installed ocsctl made on the installed emulator.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d)
emu_pid=""
cleanup() {
  if [[ -n "$emu_pid" ]]; then kill -INT "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }

stage=$work/stage
cmake --install "$build" --prefix "$stage" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
libdir=$stage/$(cache CMAKE_INSTALL_LIBDIR)

# ---- the files ----
expect=(bin/ocslab bin/ocsctl bin/ocslab-agent bin/ocslab-collbench-verbs
        share/ocslab/ocslab_plot.py lib/systemd/system/ocslab-agent.service
        share/doc/ocslab-agent/examples/sudoers share/doc/ocslab/README.md share/doc/ocslab/install.md
        share/doc/ocslab/ocsctl.md share/doc/ocslab/agent-protocol.md share/doc/ocslab/samples/sixteen-hosts/timeline.csv
        include/ocslab/ocsctl/driver.h include/ocslab/ocsctl/types.h include/ocslab/ocsctl/errors.h
        include/ocslab/ocsctl/mapping.h include/ocslab/ocsctl/port_set.h include/ocslab/ocsctl/switch_url.h
        include/ocslab/ocsctl/credentials.h include/ocslab/ocsctl/stream.h include/ocslab/common/error.h
        include/ocslab/common/clock.h include/ocslab/agent/client.h include/ocslab/forwarding/fabric.h)
[[ -x "$build/bin/ocslab-collbench-nccl" ]] && expect+=(bin/ocslab-collbench-nccl)
# The PyTorch backend's package, where the build made it (pybind11 and the Python headers found).
pkg=lib/python3/dist-packages/ocslab
if [[ -d "$build/python/ocslab" ]]; then
  expect+=($pkg/__init__.py $pkg/groups.py $pkg/torch_backend.py share/doc/ocslab/examples/torch/train_lm.py)
  compgen -G "$stage/$pkg/_shim*.so" >/dev/null || fail "not installed: $pkg/_shim*.so"
  # The installed module loads on its own (its static libraries linked in) and parses the flags.
  PYTHONPATH=$stage/lib/python3/dist-packages /usr/bin/python3 -c \
    'import ocslab._shim as s; assert s.shim_options([], 0, 1, "h") is None' || fail "import ocslab._shim"
fi
for f in "${expect[@]}"; do [[ -f "$stage/$f" ]] || fail "not installed: $f"; done
for f in libocslab_common.a libocslab_ocs.a libocslab_agent_client.a libocslab_forwarding_model.a \
         cmake/ocslab/ocslabConfig.cmake cmake/ocslab/ocslabConfigVersion.cmake cmake/ocslab/ocslabTargets.cmake \
         pkgconfig/ocslab.pc; do
  [[ -f "$libdir/$f" ]] || fail "not installed: ${libdir#"$stage"/}/$f"
done
for f in bin/ocslab bin/ocsctl bin/ocslab-agent share/ocslab/ocslab_plot.py; do
  [[ -x "$stage/$f" ]] || fail "not executable: $f"
done
# Every program's man page (gzipped) and bash completion (ocslab_cli_docs, docs/cli.md).
for f in share/man/man1/ocslab.1.gz share/man/man1/ocsctl.1.gz share/man/man1/ocslab-collbench-verbs.1.gz \
         share/man/man8/ocslab-agent.8.gz; do
  [[ -f "$stage/$f" ]] || fail "man page not installed: $f"
  gzip -t "$stage/$f" || fail "not gzip: $f"
done
for c in ocslab ocsctl ocslab-agent ocslab-collbench-verbs; do
  [[ -f "$stage/share/bash-completion/completions/$c" ]] || fail "completion not installed: $c"
done
# Build-tree only: test helpers, the protocol internals, libraries nothing outside ocslab links.
for f in bin/ocs-testpeer bin/collbench-tcp include/ocslab/ocsctl/tl1_codec.h include/ocslab/ocsctl/ssh_session.h \
         include/ocslab/ocsctl/netconf_driver.h include/ocslab/common/netlink_socket.h include/ocslab/common/process.h \
         include/ocslab/emulator include/ocslab/runner include/ocslab/testing; do
  [[ ! -e "$stage/$f" ]] || fail "installed but build-tree only: $f"
done
[[ ! -e "$libdir/libocslab_runner.a" && ! -e "$libdir/libocslab_testing.a" ]] || fail "internal library installed"
unit=$stage/lib/systemd/system/ocslab-agent.service
grep -qx "ExecStart=$stage/bin/ocslab-agent serve .*" "$unit" || fail "unit's ExecStart: $(grep ExecStart= "$unit")"
# docs/guarantees.md, "Privileges": the unit bounds the root daemon to the three capabilities the
# probes and forwarding use, gives it no way to gain more, and a read-only file system.
for key in CapabilityBoundingSet AmbientCapabilities; do
  [ "$(grep "^$key=" "$unit")" = "$key=CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK" ] || fail "unit's $key: $(grep "^$key=" "$unit")"
done
grep -qx "NoNewPrivileges=yes" "$unit" || fail "unit without NoNewPrivileges=yes"
grep -qx "ProtectSystem=strict" "$unit" || fail "unit without ProtectSystem=strict"
sudoers="$stage/share/doc/ocslab-agent/examples/sudoers"
grep -q "^Cmnd_Alias OCSLAB_BRIDGE = $stage/bin/ocslab-agent serve --stdio" "$sudoers" \
  || fail "sudoers example does not name the installed agent"
grep -qF "$stage/bin/ocslab-agent ^forwarding apply --plan - --json --state-dir /var/lib/ocslab/forwarding --op-id [A-Za-z0-9._-]+( --no-relay)?\$" "$sudoers" \
  || fail "sudoers example does not allow the runner's forwarding apply on the journal folder"
[ "$(grep -cE "$stage/bin/ocslab-agent \\^?forwarding" "$sudoers")" = 6 ] || fail "sudoers example: not the six forwarding command lines"
# No shell-style wildcard in a line that is not a regular expression: sudo's * matches across
# words, so it would admit added options.
if grep -E "ocslab-agent (forwarding|serve) " "$sudoers" | grep -qF '*'; then
  fail "sudoers example: a * wildcard: $(grep -E "ocslab-agent (forwarding|serve) " "$sudoers" | grep -F '*')"
fi
grep -q "^ocslab ALL=(root) NOPASSWD: OCSLAB_BRIDGE, OCSLAB_FORWARDING$" "$sudoers" || fail "sudoers example: the user line"
if command -v visudo >/dev/null; then visudo -cf "$stage/share/doc/ocslab-agent/examples/sudoers" >/dev/null || fail "visudo"; fi
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --man=no "$unit" 2>"$work/verify.log" || { cat "$work/verify.log"; fail "systemd-analyze verify"; }
fi
echo "installed: ${#expect[@]} files checked, $(find "$stage" -type f | wc -l) files in all"

# ---- every public header on its own ----
export PKG_CONFIG_PATH=$libdir/pkgconfig
cflags=$(pkg-config --cflags ocslab)
(cd "$stage/include" && find ocslab -name '*.h' | sort) >"$work/headers"
# One compiler per header (a header that needs another one included first fails), as many at a
# time as there are cores: this is most of the test's time.
export cflags
xargs -P "$(nproc)" -I{} sh -c 'echo "#include \"{}\"" | g++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror $cflags -x c++ - \
  || { echo "FAIL: installed header does not compile alone: {}" >&2; exit 255; }' <"$work/headers" || exit 1
echo "headers: $(wc -l <"$work/headers") compile alone"

# ---- the example of docs/ocsctl.md, both ways ----
extract() {  # the fenced block between <!-- example $1 begin --> and <!-- example $1 end -->
  awk -v b="<!-- example $1 begin -->" -v e="<!-- example $1 end -->" \
    '$0==b{on=1;next} $0==e{on=0} on && !/^```/' "$src/docs/ocsctl.md"
}
mkdir "$work/ex"
extract list_circuits.cpp >"$work/ex/list_circuits.cpp"
extract CMakeLists.txt >"$work/ex/CMakeLists.txt"
[[ -s "$work/ex/list_circuits.cpp" && -s "$work/ex/CMakeLists.txt" ]] || fail "example markers not found in docs/ocsctl.md"
cmake -S "$work/ex" -B "$work/ex/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$stage" >"$work/ex.log" 2>&1 \
  && cmake --build "$work/ex/cmake-build" >>"$work/ex.log" 2>&1 || { cat "$work/ex.log"; fail "example with find_package"; }
compile_line=$(extract pkg-config)
[[ "$compile_line" == *'pkg-config --cflags --libs ocslab'* ]] || fail "pkg-config line: $compile_line"
(cd "$work/ex" && mkdir pc && cd pc && cp ../list_circuits.cpp . && eval "$compile_line") \
  || fail "example with pkg-config: $compile_line"
echo "example: built with find_package and with pkg-config"

# ---- both against the installed emulator, circuits made by the installed ocsctl ----
export HOME=$work OCSLAB_OCS_PASSWORD=root  # no credentials file of the user's
"$stage/bin/ocsctl" emulate --size 16x16 --switching-ms 1 --listen 0 --ready-file "$work/ready.json" \
  >"$work/emulate.log" 2>&1 &
emu_pid=$!
# load-safe: polls for the ready file (the event); 1,200 tries (60 s) are a hang guard.
for _ in $(seq 1200); do [[ -s "$work/ready.json" ]] && break; sleep 0.05; done  # the emulator writes it once it listens
[[ -s "$work/ready.json" ]] || { cat "$work/emulate.log"; fail "emulator not ready"; }
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tl1"])' "$work/ready.json")
url=tl1://admin@127.0.0.1:$port
"$stage/bin/ocsctl" -s "$url" connect 3-20 1-17 2-18 >/dev/null
"$stage/bin/ocsctl" -s "$url" disconnect 2 >/dev/null
expected=$'1-17\n3-20'
for exe in "$work/ex/cmake-build/list_circuits" "$work/ex/pc/list_circuits"; do
  got=$("$exe" "$url" | sort)
  [[ "$got" == "$expected" ]] || fail "$exe listed [$got], expected [$expected]"
done
echo "example: both binaries list $(echo "$expected" | tr '\n' ' ')from $url"
