#!/usr/bin/python3
"""Provisions a freshly booted 2-host virtual lab with ansible/site.yml and checks the result.

Steps (each asserts): the packages are built (cpack); h2's Soft-RoCE device is deleted so the
softroce role has work; site.yml converges, installing the agent on h1 from the ocslab-agent .deb
and on h2 as copied binaries; a second site.yml run changes nothing (changed=0 in the JSON
callback's stats); check.yml reports the agent service active, Soft-RoCE ACTIVE and the clocks
synchronised; nics.yml --check with ConnectX-style variables on h2 prints the exact commands and
runs none; the runner's user (ocslab, key + sudo) starts a capture through the provisioned daemon,
on h1 the package's /usr/bin/ocslab-agent; `apt-get purge ocslab-agent` on h1 leaves none of the
package's files. The lab is always torn down. Usage: ansible_test.py BUILD_DIR SOURCE_DIR

Strategies: site.yml (both runs) and nics.yml run under Mitogen's mitogen_linear strategy
(Debian's ansible-mitogen), which keeps one Python interpreter per guest instead of starting one
per task: under TCG a task costs about 4 s in a fresh interpreter (Python's start-up and
AnsiballZ's imports), so the two site.yml runs take about 170 s instead of 470 s with the same
recaps. check.yml runs under Ansible's own linear strategy and ssh connection, the path a lab
uses by default, so both paths reach the guests in every run (docs/testing.md).
"""
from datetime import datetime
import json
import os
import signal
import subprocess
import sys
import time

build, src = sys.argv[1], sys.argv[2]
ocslab = os.path.join(build, "bin", "ocslab")
lab_file = os.path.join(src, "tests/vlab/labs/ansible-two.yaml")
lab = "ansible-two"
cache = os.environ.get("OCSLAB_VLAB_CACHE", os.path.expanduser("~/.cache/ocslab/vlab"))
labdir = os.path.join(cache, "labs", lab)
inv = os.path.join(labdir, "inventory.yml")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def playbook(name, *extra, check_mode=False, mitogen=True):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_PIPELINING="True",
               ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_RETRY_FILES_ENABLED="False")
    if mitogen:
        # The connect timeout also covers Mitogen's bootstrap (its interpreter started and its
        # modules sent): more than Ansible's default 10 s in a cold TCG guest.
        env.update(ANSIBLE_STRATEGY="mitogen_linear", ANSIBLE_TIMEOUT="120")
    cmd = ["ansible-playbook", "-i", inv, "-e", "@" + os.path.join(src, "tests/vlab/ansible/vlab-vars.yml"),
           "-e", json.dumps({"ocslab_install_build_dir": build}), os.path.join(src, "ansible", name), *extra]
    if check_mode:
        cmd += ["--check", "--diff"]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        print(p.stdout[-3000:], p.stderr[-3000:])
        raise
    print(f"{name}{' --check' if check_mode else ''}: rc {p.returncode} in {time.time() - t0:.0f} s, recap "
          + json.dumps(out["stats"]), flush=True)
    print_slowest_tasks(out)
    for play in out["plays"]:  # say which task failed, and why
        for t in play["tasks"]:
            for h, r in t["hosts"].items():
                if r.get("failed") or r.get("unreachable"):
                    print(f"  {h}: {t['task']['name']}: {str(r.get('msg', ''))[:400]} {str(r.get('stderr', ''))[:300]}")
    return p.returncode, out


def print_slowest_tasks(out, n=5):
    # Where a playbook's seconds went (the JSON callback's start and end of each task, over all
    # hosts at once): the CI log then says which tasks to look at when the test grows.
    def seconds(d):
        f = "%Y-%m-%dT%H:%M:%S.%fZ"
        return (datetime.strptime(d["end"], f) - datetime.strptime(d["start"], f)).total_seconds()
    timed = []
    for play in out["plays"]:
        for t in play["tasks"]:
            d = t["task"].get("duration")
            if d and d.get("start") and d.get("end"):
                timed.append((seconds(d), t["task"]["name"]))
    timed.sort(reverse=True)
    total = sum(s for s, _ in timed)
    print(f"  tasks: {len(timed)}, {total:.0f} s in all; the slowest: "
          + "; ".join(f"{name} {s:.1f} s" for s, name in timed[:n]), flush=True)


def task_results(out, task_name):
    # The JSON callback names a role's task "ROLE : NAME".
    for play in out["plays"]:
        for t in play["tasks"]:
            if t["task"]["name"] == task_name or t["task"]["name"].endswith(" : " + task_name):
                yield t["hosts"]


def ssh(host_port, command, user="root", stdin=None):
    return subprocess.run(["ssh", "-i", os.path.join(labdir, "keys/client_key"), "-o",
                           "UserKnownHostsFile=" + os.path.join(labdir, "known_hosts"), "-o", "BatchMode=yes",
                           "-p", str(host_port), f"{user}@127.0.0.1", command],
                          input=stdin, capture_output=True, text=True, timeout=120)


# Stops h1's agent, purges the package and lists what is left of it: every file, link and conffile
# it had, and every folder of its own (a path naming ocslab; /usr/bin and the like stay).
PURGE_CHECK = r"""
set -u
echo "before: $(dpkg-query -W -f='${Status} ${Version}' ocslab-agent)"
files=$(dpkg -L ocslab-agent) || exit 1
conffiles=$(dpkg-query -W -f='${Conffiles}' ocslab-agent | awk '{print $1}')
sed -i '/ocslab-agent-run$/d' /etc/inittab && kill -HUP 1
# load-bound: assumes the agent exited within 1 s of SIGTERM before the purge.
kill -TERM $(cat /run/ocslab-agent/agent.pid) 2>/dev/null; sleep 1
DEBIAN_FRONTEND=noninteractive apt-get purge -y ocslab-agent >/dev/null || exit 1
left=""
for f in $files $conffiles; do
  if [ -d "$f" ] && [ ! -L "$f" ]; then
    case "$f" in *ocslab*) left="$left $f/";; esac
  elif [ -e "$f" ] || [ -L "$f" ]; then
    left="$left $f"
  fi
done
echo "files listed: $(echo $files | wc -w), left: ${left:-none}"
dpkg-query -W -f='${Status}' ocslab-agent 2>/dev/null | grep -q 'ok installed' || echo "after: not installed"
"""

if not os.path.exists("/usr/lib/python3/dist-packages/ansible_mitogen"):
    sys.exit("Mitogen's Ansible strategy is missing: install Debian's ansible-mitogen (scripts/install-deps)")

# SIGTERM (CTest's timeout, a user) unwinds through the finally below, which stops the lab.
signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
subprocess.run([ocslab, "vlab", "down", lab], capture_output=True)
# The packages site.yml installs on h1 (the role's deb method; docs/install.md), built while the
# lab boots: cpack works on this machine, the boot mostly in the guests (about 16 s saved).
packages = os.path.join(build, "packages")
t0 = time.time()
cpack = subprocess.Popen(["cpack", "--config", os.path.join(build, "CPackConfig.cmake"), "-G", "DEB", "-B", packages],
                         cwd=build, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    up = subprocess.run([ocslab, "vlab", "up", lab_file, "--json"], capture_output=True, text=True, timeout=400)
    if up.returncode != 0:
        sys.exit("vlab up failed: " + up.stderr[-2000:])
    state = json.loads(up.stdout)
    port = {h["name"]: h["ssh_port"] for h in state["hosts"]}
    r = ssh(port["h2"], "rdma link delete rxe_eth1 && rdma link show")
    check(r.returncode == 0 and "rxe_eth1" not in r.stdout, "h2: rxe_eth1 deleted before provisioning")

    _, cpack_err = cpack.communicate(timeout=600)
    debs = sorted(f for f in os.listdir(packages) if f.startswith("ocslab-agent_") and f.endswith(".deb")) \
        if os.path.isdir(packages) else []
    check(cpack.returncode == 0 and len(debs) == 1,
          f"cpack built the agent package, done {time.time() - t0:.0f} s after it started beside the lab's boot: "
          f"{debs} {cpack_err[-500:]}")

    pub = open(os.path.join(labdir, "keys/client_key.pub")).read().strip()
    keys = json.dumps({"ocslab_agent_authorized_keys": [pub]})
    rc, out = playbook("site.yml", "-e", keys)
    check(rc == 0 and all(s["failures"] == 0 and s["unreachable"] == 0 for s in out["stats"].values()),
          "site.yml converges on h1 and h2")
    added = [r for hosts in task_results(out, "Add the missing Soft-RoCE devices (rdma link add DEV type rxe netdev NIC)")
             for h, r in hosts.items() if h == "h2" and r.get("changed")]
    check(len(added) == 1, "site.yml re-created h2's Soft-RoCE device")

    rc, out = playbook("site.yml", "-e", keys)
    check(rc == 0 and all(s["changed"] == 0 and s["failures"] == 0 for s in out["stats"].values()),
          "second site.yml run: changed=0 on every host")

    rc, out = playbook("check.yml", mitogen=False)
    reports = {h: r["msg"] for hosts in task_results(out, "Report") for h, r in hosts.items()}
    check(rc == 0 and set(reports) == {"h1", "h2"}, "check.yml reports both hosts and passes")
    for h, rep in reports.items():
        check(rep["init"] == "busybox" and rep["agent_service"] == "active" and rep["agent_socket"],
              f"{h}: agent running as a service (busybox init respawn)")
        check(rep["nics"][0]["rdma_state"] == "ACTIVE", f"{h}: rxe_eth1 ACTIVE")
        check(rep["clock_synchronised"] and abs(rep["clock_offset_ms"]) <= 50, f"{h}: clock synchronised, offset "
              f"{rep['clock_offset_ms']} ms (reference {rep['clock_reference'] or 'local'})")
        check(rep["problems"] == [], f"{h}: no problems")

    # Hardware-only settings on h2 under --check: the commands are planned and printed, none runs.
    hw = json.dumps({"ocslab_nics": [{
        "name": "eth1", "mac": "52:54:00:6c:02:01", "kind": "mlx5", "pci": "0000:00:05.0", "rdma_device": "rxe_eth1",
        "speed": 100000, "autoneg": False, "mtu": 4200, "roce_mode": 2, "roce_tos": 106, "pfc": [3],
        "dscp_prio": {26: 3}, "mlxconfig": {"LINK_TYPE_P1": 2, "SRIOV_EN": 1}, "sriov_vfs": 4, "sriov_roce": False}]})
    rc, out = playbook("nics.yml", "--limit", "h2", "-e", hw, check_mode=True)
    plan = [m for hosts in task_results(out, "Show the commands (run below; under --check, not run)")
            for h, r in hosts.items() for m in r["msg"]]
    print("\n".join("  would run: " + c for c in plan))
    cm = "/sys/kernel/config/rdma_cm/rxe_eth1"
    for want in ["ethtool -s eth1 autoneg off speed 100000 duplex full", "ip link set dev eth1 mtu 4200",
                 f'sh -c mkdir -p {cm} && echo "RoCE v2" > {cm}/ports/1/default_roce_mode',
                 f"sh -c mkdir -p {cm} && echo 106 > {cm}/ports/1/default_roce_tos",
                 "dcb pfc set dev eth1 prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off",
                 "dcb app replace dev eth1 dscp-prio 26:3",
                 "mlxconfig -d 0000:00:05.0 -y set LINK_TYPE_P1=2 SRIOV_EN=1",
                 "devlink dev eswitch set pci/0000:00:05.0 mode switchdev",
                 "sh -c echo 0 > /sys/bus/pci/devices/0000:00:05.0/sriov_numvfs && echo 4 > "
                 "/sys/bus/pci/devices/0000:00:05.0/sriov_numvfs"]:
        check(want in plan, "nics.yml --check plans: " + want)
    applied = [r for name in ["Apply link, RoCE and DCB settings", "Apply firmware settings (mlxconfig set; needs a firmware reset)",
                              "Create the partitions"]
               for hosts in task_results(out, name) for r in hosts.values()]
    check(rc == 0 and applied and all(r.get("skipped") for r in applied),
          "nics.yml --check: every apply task skipped")
    r = ssh(port["h2"], "cat /sys/class/net/eth1/mtu; ethtool eth1 | grep -c 100000Mb/s")
    check(r.stdout.split() == ["1500", "0"], "h2: MTU and speed untouched by --check")

    # The runner's path: ssh as the dedicated user, sudo to the bridge, the service's daemon.
    pid = ssh(port["h1"], "cat /run/ocslab-agent/agent.pid").stdout.strip()
    script = ('{"type":"hello","id":1,"version":1}\n'
              '{"type":"probes.start","id":2,"probes":[{"name":"carrier","interfaces":["eth1"],"interval_ms":10}]}\n')
    # sleep 3 / sleep 1 kept: 3 s of capture, then 1 s for the replies before stdin closes.
    # load-bound: assumes the replies come within the 1 s before stdin closes.
    cmd = ("(cat; sleep 3; echo '{\"type\":\"probes.stop\",\"id\":3}'; echo '{\"type\":\"bye\",\"id\":4}'; sleep 1) | "
           "sudo -n /usr/bin/ocslab-agent serve --stdio --socket /run/ocslab-agent/agent.sock")
    r = ssh(port["h1"], cmd, user="ocslab", stdin=script)
    msgs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    by_id = {m.get("id"): m for m in msgs if "id" in m}
    check(by_id.get(1, {}).get("ok") and str(by_id[1].get("pid")) == pid,
          f"ocslab@h1 via sudo reaches the service's daemon (pid {pid}): {r.stderr.strip()[:200]}")
    check(by_id.get(2, {}).get("ok") and by_id[2].get("spool", "").startswith("/var/spool/ocslab-agent/"),
          "probes.start: capture spooled by the service")
    check(sum(1 for m in msgs if m.get("type") == "sample") > 0 and by_id.get(3, {}).get("ok"),
          "samples streamed, probes.stop ok")
    # The runner's forwarding commands through the same sudoers rule: allowed on the journal
    # folder the rule names, exactly as the runner words them (a rollback of an operation the
    # journal does not hold: exit 0, a note), refused by sudo on any other folder.
    r = ssh(port["h1"], "sudo -n /usr/bin/ocslab-agent forwarding rollback --state-dir /var/lib/ocslab/forwarding "
            "--op-id apply-0-vlabtest", user="ocslab")
    check(r.returncode == 0 and "nothing to roll back for operation apply-0-vlabtest" in r.stdout,
          f"ocslab@h1: sudo forwarding rollback --op-id on the rule's folder: {r.stdout.strip()[-200:]} {r.stderr.strip()[:200]}")
    r = ssh(port["h1"], "sudo -n /usr/bin/ocslab-agent forwarding rollback --state-dir /tmp --op-id x", user="ocslab")
    check(r.returncode != 0 and "password is required" in r.stderr,
          f"ocslab@h1: sudo refuses forwarding on another folder: {r.stderr.strip()[:200]}")
    # The rule admits the runner's command lines exactly (sudo -l checks without running them):
    # each one as the runner builds it is allowed, and the same line with an option added is not.
    agent_bin = "/usr/bin/ocslab-agent"
    state = "--state-dir /var/lib/ocslab/forwarding"
    exact = [f"forwarding apply --plan - --json {state} --op-id apply-3-1f2e3d4c",
             f"forwarding apply --plan - --json {state} --op-id apply-3-1f2e3d4c --no-relay",
             f"forwarding rollback {state} --op-id apply-3-1f2e3d4c",
             f"forwarding clear --host h1 {state}",
             "forwarding ping --if eth1 --listen 192.168.127.2:18600 --secret-file - --count 5 --timeout-s 40",
             "forwarding ping --if eth1 --connect 192.168.127.3:18600 --secret-file - --count 5 --timeout-s 40"]
    added = [f"forwarding apply --plan - --json {state} --op-id apply-3-1f2e3d4c --every-nic",
             f"forwarding clear --host h1 {state} --if2-macvlan",
             "forwarding ping --if eth1 --listen 0.0.0.0:18600 --any-address --secret-file - --count 5 --timeout-s 40",
             "forwarding ping --if eth1 --listen 0.0.0.0:18600 --secret-file - --count 5 --timeout-s 40 --any-address",
             "serve --stdio --socket /run/ocslab-agent/agent.sock --listen 0.0.0.0:1"]
    script = "; ".join(f"sudo -n -l {agent_bin} {c} >/dev/null 2>&1; echo $?" for c in exact + added)
    r = ssh(port["h1"], script, user="ocslab")
    codes = r.stdout.split()
    check(codes[:len(exact)] == ["0"] * len(exact),
          f"sudoers: the runner's exact forwarding lines allowed: {list(zip(exact, codes))}")
    check(len(codes) == len(exact) + len(added) and all(c != "0" for c in codes[len(exact):]),
          f"sudoers: the same lines with an option added refused: {list(zip(added, codes[len(exact):]))}")
    r = ssh(port["h1"], "readlink /proc/$(cat /run/ocslab-agent/agent.pid)/exe")
    check(r.stdout.strip() == "/usr/bin/ocslab-agent", f"h1's daemon is the package's binary: {r.stdout.strip()}")

    # Purge on h1, as an administrator would: stop the service (here busybox init's respawn
    # entry), apt-get purge, then none of the files the package listed may be left.
    r = ssh(port["h1"], PURGE_CHECK)
    print(r.stdout + r.stderr, flush=True)
    check(r.returncode == 0 and "left: none" in r.stdout and "after: not installed" in r.stdout,
          "apt-get purge ocslab-agent leaves none of its files on h1")
finally:
    if cpack.poll() is None:
        cpack.kill()
        cpack.wait()
    d = subprocess.run([ocslab, "vlab", "down", lab], capture_output=True, text=True)
    print("vlab down:", d.stdout.strip() or d.stderr.strip())

if failures:
    sys.exit(f"{len(failures)} check(s) failed: " + "; ".join(failures))
print("all checks passed")
