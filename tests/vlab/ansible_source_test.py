#!/usr/bin/python3
"""The Ansible `source` install method on a virtual-lab guest: ansible/agent.yml with
ocslab_install_method=source on h2 of the ansible-two lab archives the checkout's HEAD, installs the
build packages, unpacks it to /tmp/ocslab-source-test/ocslab-<commit>, configures the agent-only build,
builds, installs /usr/local/bin/ocslab-agent and starts the service; a second run changes nothing
(changed=0). Then the installed binary must run in the guest and be the one its build folder made.

Not in CI (docs/testing.md): a TCG guest compiles about a hundred times slower than this machine
(one agent source file took over ten minutes), so the guest's compiler goes through ccache, which
this script first fills by building the same archive the same way here, at the same path under
/tmp (the guest's /tmp is its own), so the guest's compiles hit. The configure step, the compiler identification, the
links, the CLI-docs step and the install still run in the guest. About 15 minutes.

Usage: ansible_source_test.py BUILD_DIR SOURCE_DIR   (commit first: the archive is HEAD)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

build, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ocslab = os.path.join(build, "bin", "ocslab")
lab_file = os.path.join(src, "tests/vlab/labs/ansible-two.yaml")
lab = "ansible-two"
cache = os.environ.get("OCSLAB_VLAB_CACHE", os.path.expanduser("~/.cache/ocslab/vlab"))
labdir = os.path.join(cache, "labs", lab)
inv = os.path.join(labdir, "inventory.yml")
# The cache outside /tmp, where the guests see it (they see this machine's root, but mount a
# tmpfs of their own on /tmp). The source tree at the same path on both sides, under /tmp, so
# the guest builds its own copy and every compile's paths match the primed ones.
work = os.path.join(build, "ansible-source")
ccache_dir = os.path.join(work, "ccache")
prime_root = "/tmp/ocslab-source-test"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


commit = run(["git", "-C", src, "rev-parse", "--short=12", "HEAD"]).stdout.strip()
# One object per source: a unity build's generated sources hold the tree's absolute path, so
# they would never match between the two trees.
configure_args = ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
                  "-DOCSLAB_UNITY_BUILD=OFF"]


def ccache_env(base):
    # ccache hashes the locale variables that are set (the compiler's messages depend on them):
    # Ansible's module environment sets LC_CTYPE=C.UTF-8, which this machine's shell leaves unset,
    # and that one line of ccache's input (CCACHE_DEBUG's input-text files, 2026-11-29) was what
    # made every compile in the guest miss. The guest's headers are freshly unpacked (new ctime),
    # which would keep ccache from trusting its manifest of them.
    return {"CCACHE_DIR": ccache_dir, "CCACHE_BASEDIR": base, "CCACHE_NOHASHDIR": "1",
            "CCACHE_SLOPPINESS": "include_file_ctime,include_file_mtime", "LANG": "C", "LC_ALL": "C",
            "LC_CTYPE": "C"}


def prime():
    # The same archive, configured and built as the role does, under a base directory of its own.
    shutil.rmtree(prime_root, ignore_errors=True)
    os.makedirs(prime_root)
    tree = os.path.join(prime_root, f"ocslab-{commit}")
    archive = run(["sh", "-c", f"git -C {src} archive --format=tar --prefix=ocslab-{commit}/ HEAD | "
                               f"tar -x -C {prime_root}"])
    if archive.returncode != 0:
        sys.exit("git archive: " + archive.stderr)
    env = dict(os.environ, **ccache_env(prime_root))
    t0 = time.time()
    for cmd in (["cmake", "-S", tree, "-B", tree + "/build", "-G", "Ninja", "-DOCSLAB_COMPONENTS=agent",
                 "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_INSTALL_PREFIX=/usr/local", *configure_args],
                ["cmake", "--build", tree + "/build"]):
        p = run(cmd, env=env)
        if p.returncode != 0:
            sys.exit(" ".join(cmd) + ": " + p.stdout[-2000:] + p.stderr[-2000:])
    print(f"primed the compiler cache with the agent-only build of {commit} in {time.time() - t0:.0f} s", flush=True)


def playbook():
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_PIPELINING="True",
               ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_STRATEGY="mitogen_linear", ANSIBLE_TIMEOUT="120")
    extra = {"ocslab_install_method": "source", "ocslab_install_build": False,
             "ocslab_install_build_dir": build,
             "ocslab_install_packages_dir": os.path.join(work, "packages"),
             "ocslab_install_source_root": prime_root,
             "ocslab_install_source_cmake_args": configure_args,
             "ocslab_install_source_environment": ccache_env(prime_root)}
    cmd = ["ansible-playbook", "-i", inv, "--limit", "h2", "-e",
           "@" + os.path.join(src, "tests/vlab/ansible/vlab-vars.yml"), "-e", json.dumps(extra),
           os.path.join(src, "ansible", "agent.yml")]
    t0 = time.time()
    p = run(cmd, env=env)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        print(p.stdout[-3000:], p.stderr[-3000:])
        raise
    print(f"agent.yml (source): rc {p.returncode} in {time.time() - t0:.0f} s, recap " + json.dumps(out["stats"]),
          flush=True)
    for play in out["plays"]:
        for t in play["tasks"]:
            for h, r in t["hosts"].items():
                if r.get("failed") or r.get("unreachable"):
                    print(f"  {h}: {t['task']['name']}: {str(r.get('msg', ''))[:600]} "
                          f"{str(r.get('stdout', ''))[-600:]} {str(r.get('stderr', ''))[-600:]}")
                elif r.get("changed"):
                    print(f"  {h}: changed: {t['task']['name']} ({t['task'].get('duration', {}).get('start', '')}"
                          f" .. {t['task'].get('duration', {}).get('end', '')})")
    return p.returncode, out


def ssh(host_port, command):
    return run(["ssh", "-i", os.path.join(labdir, "keys/client_key"), "-o",
                "UserKnownHostsFile=" + os.path.join(labdir, "known_hosts"), "-o", "BatchMode=yes",
                "-p", str(host_port), "root@127.0.0.1", command], timeout=300)


signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
if run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"]).stdout.strip():
    print(f"note: {src} has uncommitted changes; the archive is HEAD ({commit})", flush=True)
prime()  # before the lab boots: its 9p view then never cached the folder without the cache
run([ocslab, "vlab", "down", lab])
try:
    up = run([ocslab, "vlab", "up", lab_file, "--json"], timeout=400)
    if up.returncode != 0:
        sys.exit("vlab up failed: " + up.stderr[-2000:])
    port = {h["name"]: h["ssh_port"] for h in json.loads(up.stdout)["hosts"]}

    rc, out = playbook()
    check(rc == 0 and out["stats"]["h2"]["failures"] == 0, "agent.yml builds and installs the agent from source on h2")
    rc, out = playbook()
    check(rc == 0 and out["stats"]["h2"]["changed"] == 0,
          f"a second run changes nothing (changed={out['stats']['h2']['changed']})")

    tree = f"{prime_root}/ocslab-{commit}"
    r = ssh(port["h2"], f"/usr/local/bin/ocslab-agent --version && cmp /usr/local/bin/ocslab-agent "
                        f"{tree}/build/bin/ocslab-agent && echo same-binary && grep -c ocslab_agent_client "
                        f"{tree}/build/build.ninja && ls {tree}/build/CMakeCache.txt && "
                        f"grep -E '^(OCSLAB_COMPONENTS|CMAKE_BUILD_TYPE)' {tree}/build/CMakeCache.txt && "
                        f"CCACHE_DIR={ccache_dir} ccache --show-stats 2>/dev/null | grep -iE 'hits|misses' | head -4")
    print(r.stdout + r.stderr, flush=True)
    check(r.returncode == 0 and "ocslab-agent" in r.stdout and "same-binary" in r.stdout,
          "/usr/local/bin/ocslab-agent runs in the guest and is what the guest's build made")
    check("OCSLAB_COMPONENTS:STRING=agent" in r.stdout, "the guest's build is the agent-only configuration")
    r = ssh(port["h2"], "pidof ocslab-agent >/dev/null && echo running")
    check("running" in r.stdout, "the agent service runs the installed binary")
finally:
    run([ocslab, "vlab", "down", lab])

if failures:
    sys.exit(f"{len(failures)} check(s) failed: " + "; ".join(failures))
print("all checks passed")
