#!/usr/bin/env python3
"""leftovers.py record STATE | check STATE: the suite's hygiene check (ctest fixture
hygiene_before / hygiene_after, docs/testing.md "Leftovers").

record writes what ocslab-named things exist now: entries of /tmp whose name holds "ocslab",
everything below /var/spool/ocslab-agent, network namespaces whose name holds "ocslab". check
lists what exists now and was not recorded, and exits 1 naming each: a test that left it must
remove it, on its failure paths too. With OCSLAB_KEEP_TEST_DIRS set, /tmp/ocslab-test-* folders
are kept on purpose (testing::TempDir) and are not counted.

OCSLAB_HYGIENE_ROOT (for the self-test) is put in front of /tmp and /var/spool, and the network
namespaces are then read from $OCSLAB_HYGIENE_ROOT/netns instead of `ip netns list`."""
import json
import os
import subprocess
import sys

ROOT = os.environ.get("OCSLAB_HYGIENE_ROOT", "")
TMP = ROOT + "/tmp"
SPOOL = ROOT + "/var/spool/ocslab-agent"


def netns():
    if ROOT:
        path = ROOT + "/netns"
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:  # no iproute2: no namespaces either
        return []
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def spool():
    found = []
    for d, subdirs, names in os.walk(SPOOL):
        subdirs.sort()
        for n in sorted(subdirs + names):
            found.append(os.path.join(d, n))
    return found


def snapshot():
    tmp = sorted(os.path.join(TMP, n) for n in os.listdir(TMP) if "ocslab" in n) if os.path.isdir(TMP) else []
    return {"tmp": tmp, "spool": spool(), "netns": [n for n in netns() if "ocslab" in n]}


def kept_on_purpose(kind, name):
    keep = os.environ.get("OCSLAB_KEEP_TEST_DIRS", "")
    return kind == "tmp" and keep not in ("", "0") and os.path.basename(name).startswith("ocslab-test-")


def main(argv):
    if len(argv) != 2 or argv[0] not in ("record", "check"):
        print("usage: leftovers.py record|check STATE_FILE", file=sys.stderr)
        return 2
    mode, state = argv
    now = snapshot()
    if mode == "record":
        os.makedirs(os.path.dirname(os.path.abspath(state)), exist_ok=True)
        with open(state, "w", encoding="utf-8") as f:
            json.dump(now, f, indent=1)
        print(f"recorded {sum(len(v) for v in now.values())} ocslab-named thing(s) before the tests in {state}")
        return 0
    try:
        with open(state, encoding="utf-8") as f:
            before = json.load(f)
    except (OSError, ValueError) as e:
        print(f"leftovers.py: cannot read the record {state} ({e}); hygiene_before must run first", file=sys.stderr)
        return 2
    left = [(kind, name) for kind, names in now.items() for name in names
            if name not in set(before.get(kind, [])) and not kept_on_purpose(kind, name)]
    for kind, name in left:
        what = {"tmp": "file or folder", "spool": "spool entry", "netns": "network namespace"}[kind]
        print(f"left after the tests: {what} {name}")
    if left:
        print(f"hygiene: {len(left)} ocslab-named thing(s) added by the tests and left (a test must remove what it "
              "makes, on failure too)")
        return 1
    print("hygiene: nothing ocslab-named left by the tests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
