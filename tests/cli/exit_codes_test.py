#!/usr/bin/python3
"""exit_codes_test BIN_DIR SOURCE_DIR: every ocslab program through each class of failure.

One exit-code table for every program (docs/exit-codes.md, ocslab::ExitCode). This runs each
built program through the classes of failure that apply to it (a missing argument or option, an
unknown option, a bad value, a bad file, an unknown interface, an unreachable peer, a refusal by
the switch, a failed run), checks the exit code against the table and that stderr names the
input, then checks that each program's --help prints the table the docs have and that -V and
--version print the same version line. Peers are on loopback: an OCS emulator this test starts
(ocsctl emulate, port 0) and ports nothing listens on. Prints one line per case; exits 1 on the
first summary with a failure, naming the case, the code and the output.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN, SRC = sys.argv[1], sys.argv[2]
DOC = os.path.join(SRC, "docs/exit-codes.md")
failures = []
ran = 0


def closed_port():
    """A loopback port nothing listens on: bound, then closed (nobody else binds it meanwhile on
    the test's machine, and a connect to it is refused at once)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(argv, env=None, timeout=60):
    e = {k: v for k, v in os.environ.items() if not k.startswith("OCSLAB_")}
    e.update({"LC_ALL": "C.UTF-8"})
    if env:
        e.update(env)
    p = subprocess.run([os.path.join(BIN, argv[0])] + argv[1:], capture_output=True, text=True, env=e,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def case(cls, argv, want, names, env=None):
    """One failure: exit `want` and stderr (or stdout) containing every string of `names`."""
    global ran
    ran += 1
    rc, out, err = run(argv, env)
    text = out + err
    missing = [n for n in names if n not in text]
    ok = rc == want and not missing
    print(f"{'ok  ' if ok else 'FAIL'} {cls:<20} exit {rc} (want {want}) {' '.join(argv)}")
    if not ok:
        failures.append(f"{cls}: {' '.join(argv)}: exit {rc}, want {want}; missing {missing}; output:\n{text[:1500]}")


# The table as docs/exit-codes.md has it: code -> name.
table = {}
for line in open(DOC):
    m = re.match(r"^\| (\d+) \| `(kExit\w+)` \|", line)
    if m:
        table[int(m.group(1))] = m.group(2)
assert table.get(0) == "kExitOk" and table.get(130) == "kExitInterrupted", f"{DOC}: no exit-code table found"
USAGE, INPUT, REFUSED, UNREACHABLE, FAILED = 1, 2, 3, 4, 5
for code, name in ((USAGE, "kExitUsage"), (INPUT, "kExitInput"), (REFUSED, "kExitRefused"),
                   (UNREACHABLE, "kExitUnreachable"), (FAILED, "kExitFailed")):
    assert table[code] == name, f"{DOC}: code {code} is {table[code]}, this test expects {name}"

tmp = tempfile.mkdtemp(prefix="ocslab-exit-codes-")
import atexit  # noqa: E402  (the folder goes on every way out, a failed assertion included)
atexit.register(shutil.rmtree, tmp, True)
spec = os.path.join(SRC, "experiments/specs/demo.yaml")
dead = closed_port()

# --- ocsctl ---------------------------------------------------------------------------------
case("missing argument", ["ocsctl", "info"], USAGE, ["no switch given", "Try 'ocsctl info --help'"])
case("missing argument", ["ocsctl", "-s", f"tl1://admin@127.0.0.1:{dead}", "connect"], USAGE,
     ["connect needs at least one INGRESS-EGRESS circuit"])
case("unknown option", ["ocsctl", "--bogus", "info"], USAGE, ["unknown option '--bogus'", "Try 'ocsctl --help'"])
case("bad value", ["ocsctl", "-s", f"tl1://admin@127.0.0.1:{dead}", "watch-power", "1", "--interval-ms", "0"],
     INPUT, ["--interval-ms must be at least 1", "Try 'ocsctl watch-power --help'"])
case("bad value", ["ocsctl", "--timeout-ms", "abc", "info"], INPUT, ["'abc'", "--timeout-ms"])
case("bad value", ["ocsctl", "-s", "http://sw1", "info"], INPUT, ["unknown scheme 'http'"])
case("bad value", ["ocsctl", "emulate", "--switching-ms", "{bogus: 1}", "--dry-run"], INPUT,
     ["--switching-ms:1:2: unknown distribution 'bogus'"])
case("bad value", ["ocsctl", "emulate", "--size", "40x", "--dry-run"], INPUT, ["--size: size must be NxM"])
case("unreachable peer", ["ocsctl", "-s", f"tl1://admin@127.0.0.1:{dead}", "info"], UNREACHABLE,
     [f"127.0.0.1:{dead}", "refused"], {"OCSLAB_OCS_PASSWORD": "x"})

def start_emulator(name, switching_ms):
    """An `ocsctl emulate` (16x16, TL1 on a free loopback port) with this switching time: its
    process and its URL. The login is the emulator's default (admin / root, docs/emulator.md)."""
    ready = os.path.join(tmp, name + ".json")
    log = os.path.join(tmp, name + ".log")
    proc = subprocess.Popen([os.path.join(BIN, "ocsctl"), "emulate", "--size", "16x16", "--switching-ms",
                             str(switching_ms), "--listen", "127.0.0.1:0", "--ready-file", ready],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                            env={k: v for k, v in os.environ.items() if not k.startswith("OCSLAB_")})
    deadline = time.monotonic() + 60  # a hang guard: the emulator writes the file once listening
    while not os.path.exists(ready) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)  # load-safe: a poll for the ready file; the 60 s deadline is only the hang guard
    assert os.path.exists(ready), f"the emulator did not start: {open(log).read()}"
    port = re.search(r'"tl1"\s*:\s*(\d+)', open(ready).read())
    return proc, f"tl1://admin@127.0.0.1:{port.group(1)}"


def stop(proc):
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


LOGIN = {"OCSLAB_OCS_PASSWORD": "root"}  # the emulator's default login (docs/emulator.md)

# A running switch: a refusal (the egress is taken) and a port outside it.
emu, url = start_emulator("fast", 1)
try:
    rc, out, err = run(["ocsctl", "-s", url, "connect", "1-17"], LOGIN)
    assert rc == 0, f"connect 1-17 on the emulator: exit {rc}: {err}"
    case("refused by switch", ["ocsctl", "-s", url, "connect", "2-17"], REFUSED,
         ["17", "already made: 1-17 (connect --replace removes it first)"], LOGIN)
    case("refused by switch", ["ocsctl", "-s", url, "list"], REFUSED, ["Invalid user name or password"],
         {"OCSLAB_OCS_PASSWORD": "wrong"})
    case("bad port", ["ocsctl", "-s", url, "connect", "40-41"], INPUT, ["40"], LOGIN)
    case("outside allow-list", ["ocsctl", "-s", url, "--allow", "1..4", "connect", "3-20"], INPUT, ["20"], LOGIN)
finally:
    stop(emu)

# A failed run: a switch slower than the reply deadline. `apply` removes 1-17 (a disconnect is
# acknowledged at once), then its connect 2-17 gets no reply within 1 s (switching takes 4 s): a
# reconfiguration failed part-way, 5, with what was made and removed named.
emu, url = start_emulator("slow", 4000)
try:
    rc, out, err = run(["ocsctl", "-s", url, "connect", "1-17"], LOGIN)
    assert rc == 0, f"connect 1-17 on the slow emulator: exit {rc}: {err}"
    mapping = os.path.join(tmp, "move.yaml")
    with open(mapping, "w") as f:
        f.write("circuits: [2-17]\n")
    case("failed run", ["ocsctl", "-s", url, "--timeout-ms", "1000", "apply", mapping], FAILED,
         ["reconfiguration failed at (ENT-PATCH", "removed 1 of 1: 1-17"], LOGIN)
finally:
    stop(emu)

# --- ocslab ---------------------------------------------------------------------------------
case("missing argument", ["ocslab", "run"], USAGE, ["usage: ocslab run SPEC.yaml"])
case("unknown option", ["ocslab", "run", spec, "--bogus"], USAGE, ["unknown option '--bogus'"])
case("bad value", ["ocslab", "run", spec, "--check", "--dwell", "abc"], INPUT, ["--dwell", "'abc'"])
case("bad value", ["ocslab", "plot", tmp, "--format", "gif"], INPUT, ["--format is png or svg, got 'gif'"])
case("bad file", ["ocslab", "run", os.path.join(tmp, "nosuch.yaml")], INPUT, ["nosuch.yaml"])
case("failed run", ["ocslab", "vlab", "down", "nosuch", "--cache", tmp], FAILED, ["no virtual lab named 'nosuch'"])


def real_lab_spec(name, switch_url):
    """A spec for three real hosts whose SSH port is closed, on `switch_url`: the runner reaches the
    switch before any host, so the switch's failures come first."""
    path = os.path.join(tmp, name + ".yaml")
    hosts = "".join(f"    - {{name: h{i}, ssh: 'root@127.0.0.1:{dead}', nics: [{{name: lo, tx_port: {i}, rx_port: {16 + i}}}]}}\n"
                    for i in (1, 2, 3))
    with open(path, "w") as f:
        f.write(f"name: {name}\nlab:\n  inventory:\n{hosts}switch: {{url: '{switch_url}'}}\n"
                "mappings:\n  a: [h1:lo <-> h2:lo]\n  b: [h1:lo <-> h3:lo]\n"
                f"schedule: {{reconfigurations: 2, dwell_s: 1}}\nprobes: {{carrier: {{interval_ms: 10}}}}\n"
                f"output: {os.path.join(tmp, 'results')}\n")
    return path


case("unreachable peer", ["ocslab", "run", real_lab_spec("dead-switch", f"tl1://admin@127.0.0.1:{dead}")],
     UNREACHABLE, [f"127.0.0.1:{dead}", "Connection refused"], {"OCSLAB_OCS_PASSWORD": "x"})
emu, url = start_emulator("run", 1)
try:
    case("refused by switch", ["ocslab", "run", real_lab_spec("wrong-login", url)], REFUSED,
         ["Invalid user name or password"], {"OCSLAB_OCS_PASSWORD": "wrong"})
finally:
    stop(emu)
controller = os.path.join(tmp, "controller.yaml")
with open(controller, "w") as f:
    f.write(f'job: exit\npp: 1\nrails: [{{name: r, switch: "tl1://admin@127.0.0.1:{dead}", slots: [1-65]}}]\n')
case("unreachable peer", ["ocslab", "controller", controller, "--duration", "1"], UNREACHABLE,
     [f"127.0.0.1:{dead}", "refused"], {"OCSLAB_OCS_PASSWORD": "x"})

# --- ocslab-agent ---------------------------------------------------------------------------
case("missing option", ["ocslab-agent", "capture"], USAGE, ["--probes is required", "Try 'ocslab-agent capture --help'"])
case("unknown option", ["ocslab-agent", "capture", "--bogus"], USAGE, ["unknown option '--bogus'"])
case("bad value", ["ocslab-agent", "capture", "--probes", "heartbeat", "--interval-ms", "0"], INPUT,
     ["--interval-ms must be >= 1"])
case("bad value", ["ocslab-agent", "capture", "--probes", "heartbeat", "--interval-ms", "abc"], INPUT,
     ["'abc'", "--interval-ms"])
case("bad value", ["ocslab-agent", "capture", "--probes", "heartbeat", "--format", "xml"], INPUT, ["'xml'"])
case("unknown interface", ["ocslab-agent", "capture", "--probes", "carrier", "--if", "nosuchif0", "--duration", "0.1"],
     INPUT, ["nosuchif0", "no such interface"])
case("unknown interface", ["ocslab-agent", "module", "nosuchif0"], INPUT, ["nosuchif0", "no such interface"])
# rx-power reads a transceiver's EEPROM through ethtool: loopback has none, so nothing can run.
case("refused (host)", ["ocslab-agent", "capture", "--probes", "rx_power", "--if", "lo", "--duration", "0.1"],
     REFUSED, ["none of the requested probes can run on this host"])

# A failed run: a daemon cannot serve a socket another daemon holds (its lock is taken).
rundir, spool = os.path.join(tmp, "agent-run"), os.path.join(tmp, "agent-spool")
for d in (rundir, spool):
    os.mkdir(d, 0o700)
sock = os.path.join(rundir, "agent.sock")
daemon = subprocess.Popen([os.path.join(BIN, "ocslab-agent"), "serve", "--socket", sock, "--spool-dir", spool],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.monotonic() + 60  # a hang guard: the daemon makes the socket once serving
    while not os.path.exists(sock) and time.monotonic() < deadline and daemon.poll() is None:
        time.sleep(0.05)  # load-safe: a poll for the socket; the 60 s deadline is only the hang guard
    assert os.path.exists(sock), f"the agent daemon did not start (exit {daemon.poll()})"
    case("failed run", ["ocslab-agent", "serve", "--socket", sock, "--spool-dir", spool], FAILED,
         ["another ocslab-agent daemon serves", sock])
finally:
    stop(daemon)

# --- the collbench programs -----------------------------------------------------------------
for prog in ("ocslab-collbench-verbs", "ocslab-collbench-nccl"):
    if not os.path.exists(os.path.join(BIN, prog)):
        print(f"note {prog}: not built here, skipped")
        continue
    try_help = f"Try '{prog} --help'."
    case("unknown option", [prog, "--bogus"], USAGE, ["unknown option '--bogus'", try_help])
    case("bad value", [prog, "--rank", "x"], INPUT, ["'x'", "--rank", try_help])
    iface = ["--if", "lo"] if prog == "ocslab-collbench-verbs" else []  # nccl picks its GPU, not a NIC
    case("missing option", [prog, "--nranks", "2", "--rendezvous", "127.0.0.1:1", "-b", "8"] + iface, USAGE,
         ["missing --rank", try_help])
    if prog == "ocslab-collbench-verbs":
        case("missing option", [prog], USAGE, ["missing --if", try_help])
        case("bad value", [prog, "--rank", "0", "--if", "lo", "-n", "0"], INPUT, ["-n/--iters 0"])
        case("unreachable peer", [prog, "--rank", "1", "--nranks", "2", "--rendezvous", f"127.0.0.1:{dead}", "--if",
                                  "lo", "-b", "8", "-e", "8", "--timeout-s", "0.5"], UNREACHABLE,
             [f"could not reach rank 0 at 127.0.0.1:{dead}"])
    elif not any(n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev")):
        # Built against CUDA, on a machine without a GPU (the driver's device nodes say so).
        case("refused (host)", [prog, "--rank", "1", "--nranks", "2", "--rendezvous", f"127.0.0.1:{dead}", "-b", "8",
                                "-e", "8"], REFUSED, ["no CUDA device visible"])
    else:
        case("unreachable peer", [prog, "--rank", "1", "--nranks", "2", "--rendezvous", f"127.0.0.1:{dead}", "-b", "8",
                                  "-e", "8", "--timeout-s", "0.5"], UNREACHABLE,
             [f"could not reach rank 0 at 127.0.0.1:{dead}"])

# --- every program: the table in --help, -V ------------------------------------------------
for prog in ("ocsctl", "ocslab", "ocslab-agent", "ocslab-collbench-verbs", "ocslab-collbench-nccl"):
    if not os.path.exists(os.path.join(BIN, prog)):
        continue
    ran += 1
    rc, out, err = run([prog, "--help"])
    codes = {int(m.group(1)) for m in re.finditer(r"^  (\d+) +\S", out, re.M)}
    if rc != 0 or codes != set(table):
        failures.append(f"{prog} --help: exit {rc}, codes {sorted(codes)}, docs/exit-codes.md {sorted(table)}")
    print(f"{'ok  ' if rc == 0 and codes == set(table) else 'FAIL'} {'--help table':<20} {prog}: codes {sorted(codes)}")
    ran += 1
    v1, v2 = run([prog, "--version"]), run([prog, "-V"])
    good = v1[0] == 0 and v2[0] == 0 and v1[1] == v2[1] and v1[1].startswith(prog + " ")
    if not good:
        failures.append(f"{prog}: --version {v1}, -V {v2}")
    print(f"{'ok  ' if good else 'FAIL'} {'-V / --version':<20} {prog}: {v1[1].strip()!r}")

print(f"exit-codes: {ran} cases, {len(failures)} failed")
for f in failures:
    print("\n" + f)
sys.exit(1 if failures else 0)
