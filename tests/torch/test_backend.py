"""Integration test of the ocslab torch backend on loopback: the example DP x PP job trains on
4 local ranks with gloo and with backend "ocslab" (pass-through, and under a real `ocslab
controller` rewiring the OCS emulator), with the same loss at every step; a wrong token or an
unreachable controller stops every rank at init_process_group with a clear error.

Environment (set by ctest, tests/CMakeLists.txt): OCSLAB_BIN_DIR (ocslab, ocsctl) and
PYTHONPATH with the build tree's ocslab package (its C++ module included).
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import ranks

STEPS = "4"
BIN = os.environ.get("OCSLAB_BIN_DIR", "")
LAUNCH = ["-m", "ocslab.torch_backend", ranks.EXAMPLE]


def native():
    """The plain gloo run's losses, computed once for every test that compares with it."""
    if native.cache is None:
        results = ranks.run_ranks([ranks.EXAMPLE, "--steps", STEPS])
        for rank, (rc, _, err) in enumerate(results):
            assert rc == 0, f"gloo rank {rank} exited {rc}: {err[-2000:]}"
        native.cache = ranks.losses(results)
        assert sorted(native.cache) == list(range(int(STEPS))), native.cache
    return native.cache


native.cache = None


class Controller:
    """`ocsctl emulate` (an 8x8 switch) and `ocslab controller` for job "torch" (pp=2, dp=2)
    on loopback, with a token file; events are read after stop()."""

    def __init__(self, dir):
        self.dir = dir
        self.token = os.path.join(dir, "token")
        with open(os.open(self.token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("torch-backend-test-token-0123456789\n")
        ready = os.path.join(dir, "ready.json")
        switch_port = ranks.free_port()
        self.emulator = subprocess.Popen(
            [os.path.join(BIN, "ocsctl"), "emulate", "--size", "8x8", "--switching-ms", "5", "--listen",
             f"127.0.0.1:{switch_port}", "--ready-file", ready],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            assert time.monotonic() < deadline and self.emulator.poll() is None, "the emulator did not start"
            time.sleep(0.05)  # load-safe: a poll interval; the 30 s deadline above is the hang guard
        cfg = os.path.join(dir, "job.yaml")
        with open(cfg, "w") as f:
            f.write(f"job: torch\npp: 2\ndims: [{{name: dp, size: 2}}]\nlisten: 127.0.0.1:0\ntoken_file: token\n"
                    f"ack_timeout_ms: 5000\nrails:\n  - name: rail0\n    switch: tl1://admin@127.0.0.1:{switch_port}\n"
                    f"    allow: 1..4,9..12\n    slots: [1-9, 2-10, 3-11, 4-12]\n")
        self.events = os.path.join(dir, "events.csv")
        self.stderr = open(os.path.join(dir, "controller.log"), "w+")
        env = dict(os.environ, OCSLAB_OCS_PASSWORD="root")
        self.proc = subprocess.Popen([os.path.join(BIN, "ocslab"), "controller", cfg, "--events", self.events],
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        first = self.proc.stdout.readline()
        assert first, f"the controller printed nothing: {self.log()}"
        self.listen = json.loads(first)["listen"]

    def log(self):
        if self.stderr.closed:
            with open(self.stderr.name) as f:
                return f.read()
        self.stderr.seek(0)
        return self.stderr.read()

    def env(self, token_file=None):
        return {"OCSLAB_CONTROLLER": self.listen, "OCSLAB_JOB": "torch", "OCSLAB_LAYOUT": "pp=2,dp=2",
                "OCSLAB_CONTROLLER_TOKEN_FILE": token_file or self.token,
                "OCSLAB_SHIM_CSV": os.path.join(self.dir, "shim-rank{rank}.csv")}

    def stop(self):
        """Stops the controller (it writes its events then) and the emulator; the events' rows."""
        for p in (self.proc, self.emulator):
            if p.poll() is None:
                p.send_signal(signal.SIGINT if p is self.proc else signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.proc.stdout.close()
        self.stderr.close()
        if not os.path.exists(self.events):
            return []
        with open(self.events) as f:
            return list(csv.DictReader(f))


class BackendTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ocslab-torch-")
        self.controller = None

    def tearDown(self):
        if self.controller:
            self.controller.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_pass_through_trains_like_gloo(self):
        env = {k: "" for k in ("OCSLAB_CONTROLLER", "OCSLAB_JOB", "OCSLAB_CONTROLLER_TOKEN_FILE")}
        results = ranks.run_ranks(LAUNCH + ["--backend", "ocslab", "--steps", STEPS], env=env)
        for rank, (rc, _, err) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {rank}: {err[-2000:]}")
            # Said once per rank, so a native run under the backend's name is never mistaken for a controlled one.
            self.assertEqual(err.count("no controller (OCSLAB_CONTROLLER unset)"), 1, err)
        self.assertEqual(ranks.losses(results), native())

    def test_ddp_reaches_the_backend(self):
        job = os.path.join(ranks.HERE, "ddp_job.py")
        grads = []
        for argv in ([job, "gloo"], ["-m", "ocslab.torch_backend", job, "ocslab"]):
            results = ranks.run_ranks(argv, world=2)
            for rank, (rc, _, err) in enumerate(results):
                self.assertEqual(rc, 0, f"{argv} rank {rank}: {err[-2000:]}")
            grads.append([out.strip() for _, out, _ in results])
        self.assertEqual(grads[0][0], grads[0][1])  # averaged over the ranks
        self.assertEqual(grads[1], grads[0])

    def test_controller_sees_every_group_and_the_losses_stay(self):
        self.controller = c = Controller(self.dir)
        results = ranks.run_ranks(LAUNCH + ["--backend", "ocslab", "--steps", STEPS], env=c.env())
        for rank, (rc, _, err) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {rank}: {err[-2000:]}\ncontroller: {c.log()[-2000:]}")
        self.assertEqual(ranks.losses(results), native())
        events = c.stop()
        requests = {}
        for e in events:
            if e["kind"] == "request":
                requests.setdefault(e["group"], set()).add(int(e["rank"]))
        # The pipeline pairs (sends on the default group) and each stage's data-parallel group,
        # each asked for by exactly its members.
        self.assertEqual(requests, {"g0.2": {0, 2}, "g1.3": {1, 3}, "g0.1": {0, 1}, "g2.3": {2, 3}}, c.log())
        per_group = sum(1 for e in events if e["kind"] == "request" and e["group"] == "g0.1")
        self.assertEqual(per_group, 2 * int(STEPS))  # one all-reduce per step on each of its two ranks
        reconfigs = sum(1 for e in events if e["kind"] == "reconfig_end")
        self.assertGreater(reconfigs, 0)
        self.assertFalse([e for e in events if e["kind"] in ("fallback", "disconnect", "rejected")], c.log())
        # Each rank's shim wrote its Samples (OCSLAB_SHIM_CSV): requests on its own groups, and
        # rewirings seen from the ranks as from the controller.
        rewired = 0
        for rank in range(4):
            with open(os.path.join(self.dir, f"shim-rank{rank}.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertTrue(any(r["signal"] == "request" and r["subject"].startswith(f"rank{rank} g") for r in rows))
            rewired += sum(1 for r in rows if r["signal"] == "reconfigured" and r["value"] == "1")
        self.assertGreater(rewired, 0)

    def test_provisioning_asks_only_at_learned_boundaries(self):
        """After profiling, the shim runs the learned step: a request at each phase's first op
        and each pipeline send, sent ahead by the previous op's post hook; the rest of a phase
        is granted with its first op (O1). The data is a plain gloo run's."""
        job, steps = os.path.join(ranks.HERE, "phase_job.py"), 6
        gloo = ranks.run_ranks([job, "gloo", str(steps)])
        for rank, (rc, _, err) in enumerate(gloo):
            self.assertEqual(rc, 0, f"gloo rank {rank}: {err[-2000:]}")
        self.controller = c = Controller(self.dir)
        env = dict(c.env(), OCSLAB_PHASE_MODE="provisioning", OCSLAB_PROFILE_STEPS="2", OCSLAB_OUTPUT=self.dir)
        results = ranks.run_ranks(["-m", "ocslab.torch_backend", job, "ocslab", str(steps)], env=env)
        for rank, (rc, _, err) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {rank}: {err[-2000:]}\ncontroller: {c.log()[-2000:]}")
            self.assertNotIn("left the learned step", err)
        self.assertEqual(ranks.losses(results), ranks.losses(gloo))
        self.assertEqual(sorted(ranks.losses(gloo)), list(range(steps)))
        events = c.stop()
        self.assertFalse([e for e in events if e["kind"] in ("fallback", "disconnect", "rejected")], c.log())
        # Each rank's step: a pipeline send and receive on its pair, then three all-reduces on its
        # stage's DP group: 3 phases, 2 of them pipeline transfers, so 3 requests per learned step.
        # Learned (2 repetitions) at the last op of step 1; steps 2..5 run on the table.
        pairs, dps = {0: "g0.2", 1: "g1.3", 2: "g0.2", 3: "g1.3"}, {0: "g0.1", 1: "g0.1", 2: "g2.3", 3: "g2.3"}
        for rank in range(4):
            with open(os.path.join(self.dir, f"phases-rank{rank}.csv")) as f:
                self.assertEqual(len(list(csv.DictReader(f))), 5, f"rank {rank}")
            mine = [e for e in events if e["kind"] == "request" and e["rank"] == str(rank)]
            dp = [int(e["seq"]) for e in mine if e["group"] == dps[rank]]
            pp = [(int(e["seq"]), e["value"]) for e in mine if e["group"] == pairs[rank]]
            # Steps 0 and 1 ask for each of their 3 all-reduces; then only a phase's first
            # (seq 3s + 1 in step s), provisioned.
            self.assertEqual(sorted(dp), [1, 2, 3, 4, 5, 6, 7, 10, 13, 16], f"rank {rank}")
            # Every pipeline op asks (seq 2s + 1, 2s + 2), from step 2 on ahead of it; the last
            # op of the run provisions the next step's first, which never comes.
            self.assertIn([s for s, _ in pp], (list(range(1, 13)), list(range(1, 14))), f"rank {rank}")
            self.assertEqual({v for s, v in pp if s >= 5}, {"1"}, f"rank {rank}: {pp}")
            self.assertEqual({e["value"] for e in mine if e["group"] == dps[rank] and int(e["seq"]) > 6}, {"1"})
            granted = [e for e in events if e["kind"] == "ack" and e["rank"] == str(rank) and
                       e["detail"].startswith("granted with seq")]
            self.assertEqual(sorted(int(e["seq"]) for e in granted), [8, 9, 11, 12, 14, 15, 17, 18], f"rank {rank}")

    def test_shim_drops_a_step_an_op_leaves(self):
        """Unmarked ops, the step [1 KiB, 2 KiB, 2 KiB, 2 KiB] on each DP group, 2 repetitions
        wanted: the shim's first period is [2 KiB] (op 2); op 4 refutes it, and the real step is
        learned at op 7: from step 2 on one request per step, the rest granted. Four shims in
        threads through ocslab._shim, on demand (no torch)."""
        from ocslab import _shim

        self.controller = c = Controller(self.dir)
        runs = {}

        def rank(r):
            options = _shim.shim_options(["--controller", c.listen, "--job", "torch", "--controller-token-file",
                                          c.token], r, 4, "localhost", 5000, 2)
            shim = _shim.Shim(options)
            group, members = ("g0.1", [0, 1]) if r < 2 else ("g2.3", [2, 3])
            shim.add_group(group, "dp", members)
            asked = ""
            for _ in range(5):
                for nbytes in (1024, 2048, 2048, 2048):
                    asked += "B" if shim.pre_communication(group, "allreduce", nbytes, _shim.STEP_UNKNOWN).barrier else "."
                    shim.post_communication(group, "allreduce", nbytes, _shim.STEP_UNKNOWN)
            runs[r] = (asked, list(shim.reports))
            shim.close()

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        events = c.stop()
        self.assertFalse([e for e in events if e["kind"] in ("fallback", "disconnect", "rejected")], c.log())
        for r in range(4):
            self.assertIn(r, runs, c.log())
            asked, reports = runs[r]
            self.assertEqual(asked, "BBBBBBBBB...B...B...", f"rank {r}")
            self.assertEqual(len(reports), 1, reports)
            self.assertIn(f"rank {r}: op 4 (allreduce on ", reports[0])
            self.assertIn("left the learned step of 1 op(s)", reports[0])

    def assert_all_fail_at_init(self, results, words):
        for rank, (rc, out, err) in enumerate(results):
            self.assertNotEqual(rc, 0, f"rank {rank} succeeded: {out}")
            self.assertNotIn("step ", out)  # before the first step
            self.assertIn("ControllerError: ocslab backend, rank", err)
            self.assertIn(words, err)

    def test_wrong_token_fails_at_init(self):
        self.controller = c = Controller(self.dir)
        bad = os.path.join(self.dir, "bad-token")
        with open(os.open(bad, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("not-the-controllers-token-at-all\n")
        results = ranks.run_ranks(LAUNCH + ["--backend", "ocslab", "--steps", STEPS], env=c.env(bad))
        self.assert_all_fail_at_init(results, "with a wrong token; refused")
        self.assertFalse([e for e in c.stop() if e["kind"] == "request"])

    def test_unreachable_controller_fails_at_init(self):
        token = os.path.join(self.dir, "token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("torch-backend-test-token-0123456789\n")
        env = {"OCSLAB_CONTROLLER": f"127.0.0.1:{ranks.free_port()}", "OCSLAB_JOB": "torch",
               "OCSLAB_LAYOUT": "pp=2,dp=2", "OCSLAB_CONTROLLER_TOKEN_FILE": token}
        results = ranks.run_ranks(LAUNCH + ["--backend", "ocslab", "--steps", STEPS], env=env)
        self.assert_all_fail_at_init(results, "connect to controller 127.0.0.1:")

    def test_bad_settings_fail_at_init_naming_the_variable(self):
        env = {"OCSLAB_CONTROLLER": "127.0.0.1:7100", "OCSLAB_JOB": "", "OCSLAB_LAYOUT": "pp=1",
               "OCSLAB_CONTROLLER_TOKEN_FILE": ""}
        self.assert_all_fail_at_init(ranks.run_ranks(LAUNCH + ["--backend", "ocslab"], world=1, env=env),
                                     "OCSLAB_CONTROLLER needs OCSLAB_JOB NAME")
        env.update(OCSLAB_JOB="torch", OCSLAB_LAYOUT="pp=2,dp=2")
        self.assert_all_fail_at_init(ranks.run_ranks(LAUNCH + ["--backend", "ocslab"], world=1, env=env),
                                     "OCSLAB_LAYOUT: layout 'pp=2,dp=2': 4 ranks, but the world has 1")


if __name__ == "__main__":
    unittest.main()
