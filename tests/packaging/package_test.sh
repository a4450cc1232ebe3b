#!/usr/bin/env bash
# integration_package: CPack makes the three Debian packages of docs/install.md from the release
# build; each holds its files (and not the others'), and the Depends lines dpkg-shlibdeps
# computed name the shared libraries the binaries link.
# Usage: package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$work" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
deb() { echo "$work/$1_${version}-1_${arch}.deb"; }
for p in ocslab ocslab-agent libocs-dev; do [[ -f $(deb "$p") ]] || { ls "$work"; fail "no package $p"; }; done

contents() { dpkg-deb -c "$(deb "$1")" | awk '{print $6}' | sed 's#^\./#/#'; }
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
has() { contents "$1" | grep -qx "$2" || fail "$1 lacks $2"; }
lacks() { ! contents "$1" | grep -q "$2" || fail "$1 holds $2"; }

has ocslab /usr/bin/ocslab
has ocslab /usr/bin/ocsctl
has ocslab /usr/bin/ocslab-collbench-verbs
has ocslab /usr/share/ocslab/ocslab_plot.py
has ocslab /usr/share/doc/ocslab/README.md
has ocslab /usr/share/doc/ocslab/install.md
has ocslab /usr/share/man/man1/ocsctl.1.gz
has ocslab /usr/share/bash-completion/completions/ocslab
if [[ -d "$build/python/ocslab" ]]; then has ocslab /usr/lib/python3/dist-packages/ocslab/torch_backend.py; fi
lacks ocslab 'ocslab-agent$'
lacks ocslab 'ocslab-agent.8.gz$'
lacks ocslab 'ocslab-collbench-nccl$'  # links CUDA and NCCL, which no Debian package provides
lacks ocslab '\.a$'
has ocslab-agent /usr/bin/ocslab-agent
has ocslab-agent /usr/lib/systemd/system/ocslab-agent.service
has ocslab-agent /usr/share/doc/ocslab-agent/examples/sudoers
has ocslab-agent /usr/share/man/man8/ocslab-agent.8.gz
has ocslab-agent /usr/share/bash-completion/completions/ocslab-agent
lacks ocslab-agent ocsctl.1
lacks ocslab-agent /usr/bin/ocsctl
lacks ocslab-agent /usr/include/
has libocs-dev /usr/lib/libocslab_ocs.a
has libocs-dev /usr/lib/libocslab_common.a
has libocs-dev /usr/include/ocslab/ocsctl/driver.h
has libocs-dev /usr/lib/cmake/ocslab/ocslabConfig.cmake
has libocs-dev /usr/lib/pkgconfig/ocslab.pc
lacks libocs-dev /usr/bin/
lacks libocs-dev tl1_codec.h
# Every package has its Debian changelog (lintian's no-changelog), a gzip of one entry for this
# version.
for p in ocslab ocslab-agent libocs-dev; do
  has "$p" "/usr/share/doc/$p/changelog.Debian.gz"
  dpkg-deb --fsys-tarfile "$(deb "$p")" | tar -xO "./usr/share/doc/$p/changelog.Debian.gz" | gzip -dc \
    | sed -n 1p | grep -qx "$p (${version}-1) unstable; urgency=medium" || fail "$p: changelog.Debian.gz has no entry for ${version}-1"
done

# Depends: computed by dpkg-shlibdeps from the binaries (libssh for ocsctl, libibverbs and
# libnl-route for the agent); the -dev package's is written in cmake/OcslabInstall.cmake.
depends_has() { [[ "$(field "$1" Depends)" == *"$2"* ]] || fail "$1 Depends lacks $2: $(field "$1" Depends)"; }
depends_has ocslab libssh
depends_has ocslab libc6
depends_has ocslab-agent libibverbs1
depends_has ocslab-agent libnl-route-3
depends_has ocslab-agent libc6
depends_has libocs-dev libssh-dev
# A virtual-lab run copies the agent into the guests: ocslab recommends the agent of its own
# version (apt installs Recommends by default), and no longer only suggests it.
[[ "$(field ocslab Recommends)" == *"ocslab-agent (= ${version}-1)"* ]] \
  || fail "ocslab Recommends lacks ocslab-agent (= ${version}-1): $(field ocslab Recommends)"
[[ "$(field ocslab Suggests)" != *ocslab-agent* ]] || fail "ocslab still only suggests ocslab-agent"
# The unit in the package runs the packaged binary.
dpkg-deb --fsys-tarfile "$(deb ocslab-agent)" | tar -xO ./usr/lib/systemd/system/ocslab-agent.service \
  | grep -q '^ExecStart=/usr/bin/ocslab-agent serve ' || fail "the packaged unit does not run /usr/bin/ocslab-agent"
for p in ocslab ocslab-agent libocs-dev; do
  echo "$p: $(contents "$p" | grep -vc '/$') files; Depends: $(field "$p" Depends)"
done
