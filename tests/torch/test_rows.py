"""Unit test of a torch rank's results (ocslab.rows): the op rows in collbench's ops-rank<R>.csv
format with their steps from the C++ phase profiler's learned step, the learned step as
phases-rank<R>.csv, and a stream that never repeats (no table, every row step 0, said on
stderr). Needs the build's ocslab package with its C++ module (PYTHONPATH), not torch."""

import contextlib
import csv
import io
import os
import sys
import tempfile
import unittest

from ocslab import rows


def run(stream, steps):
    """Feeds (group, dim, ranks, type, bytes) ops to a Recorder of rank 0, 1 ms apart and 100 us
    long, natively (no shim decision); returns (ops rows, phases rows or None, stderr)."""
    with tempfile.TemporaryDirectory() as folder:
        rec = rows.Recorder(0, folder, steps)
        t = 1_000_000_000
        for name, dim, ranks, kind, nbytes in stream:
            clock = ((t, t), (t + 1000, t + 1000), (t + 100_000, t + 100_000), t + 101_000)
            rec.add((name, dim), ranks, kind, nbytes, None, clock)
            t += 1_000_000
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rec.write()
        with open(os.path.join(folder, "ops-rank0.csv")) as f:
            ops = list(csv.DictReader(f))
        phases = None
        if os.path.exists(os.path.join(folder, "phases-rank0.csv")):
            with open(os.path.join(folder, "phases-rank0.csv")) as f:
                phases = list(csv.DictReader(f))
        assert os.path.exists(os.path.join(folder, "timeline-rank0.csv"))
        return ops, phases, err.getvalue()


BARRIER = ("world", "mgmt", [0, 1, 2, 3], "barrier", 0)
BROADCAST = ("g0.1", "dp", [0, 1], "broadcast", 256)
ALLREDUCE = ("g0.1", "dp", [0, 1], "allreduce", 4096)
SEND = ("g0.2", "pp", [0, 2], "send", 1024)
RECV = ("g0.2", "pp", [0, 2], "recv", 1024)


class RowsTest(unittest.TestCase):
    def test_steps_from_the_learned_step_after_a_warm_up(self):
        # A warm-up barrier, then 5 steps of send, recv, broadcast (no collbench type: no row), allreduce.
        ops, phases, err = run([BARRIER] + [SEND, RECV, BROADCAST, ALLREDUCE] * 5, steps=5)
        self.assertEqual(err, "")
        self.assertEqual(len(ops), 1 + 3 * 5)
        first = ops[0]
        self.assertEqual((first["step"], first["warmup"], first["op_index"], first["group"], first["kind"],
                          first["op"]), ("0", "1", "0", "world", "world", "barrier"))
        # Learned steps count from 1 after the warm-up; the broadcast keeps its index in the step.
        got = [(r["step"], r["op_index"], r["group"], r["kind"], r["op"], r["bytes"]) for r in ops[1:5]]
        self.assertEqual(got, [("1", "0", "g0.2", "pp", "sendrecv", "1024"), ("1", "1", "g0.2", "pp", "sendrecv", "1024"),
                               ("1", "3", "g0.1", "dp", "allreduce", "4096"), ("2", "0", "g0.2", "pp", "sendrecv", "1024")])
        self.assertEqual(ops[-1]["step"], "5")
        self.assertTrue(all(r["warmup"] == "0" and r["phase"] == "none" for r in ops[1:]))
        # The op took 99 us between the pre hook's end and its completion; the hooks took 2 us.
        self.assertEqual((ops[1]["time_us"], ops[1]["reconfig_wait_us"]), ("99.000", "2.000"))
        # compute: from the previous op's post hook to this op's pre hook (1 ms apart, 101 us long).
        self.assertEqual((ops[0]["compute_ns"], ops[1]["compute_ns"]), ("0", "899000"))
        self.assertEqual([(p["index"], p["group"], p["type"], p["bytes"], p["idle_us"]) for p in phases],
                         [("0", "g0.2", "send", "1024", "900"), ("1", "g0.2", "recv", "1024", "900"),
                          ("2", "g0.1", "broadcast", "256", "900"), ("3", "g0.1", "allreduce", "4096", "900")])

    def test_a_stream_that_does_not_repeat_enough_has_no_table(self):
        ops, phases, err = run([SEND, RECV, ALLREDUCE] * 4, steps=5)
        self.assertIsNone(phases)
        self.assertIn("ocslab: rank 0: no phase table: the op sequence does not repeat", err)
        self.assertEqual([(r["step"], r["op_index"]) for r in ops], [("0", str(k)) for k in range(12)])


if __name__ == "__main__":
    unittest.main()
