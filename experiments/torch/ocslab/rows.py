"""A torch rank's results in collbench's formats: each op's row (ops-rank<R>.csv,
timeline-rank<R>.csv) with its step from the C++ phase profiler's learned step, and the learned
step itself (phases-rank<R>.csv). No torch here (tests/torch/test_rows.py runs without it); the
writers and the profiler are C++, in ocslab._shim. docs/workloads.md, "What a torch rank writes".
"""

import os
import socket
import sys

from ocslab import groups


class Recorder:
    """Each op's row in collbench's ops-rank<R>.csv format, and the rank's op stream fed to the
    C++ phase profiler: at exit the learned step boundary gives every row its step and its
    index in the step (docs/workloads.md, "What a torch rank writes"). Rows and the table are
    written by the C++ writers through ocslab._shim."""

    def __init__(self, rank, folder, steps):
        from ocslab import _shim  # the row writer and the profiler are C++: ImportError without them

        self._shim = _shim
        self.rank = rank
        self.folder = folder
        self.host = socket.gethostname()
        self.profiler = _shim.PhaseProfiler(steps)
        self.ops = 0  # ops profiled: a row's position in the stream
        self.rows = []  # (position, OpRecord)
        self.last_end = None  # monotonic ns when the previous op's post hook returned

    def add(self, group, ranks, kind, nbytes, decision, clock):
        """clock: (wait start, op start, op end) as (realtime, monotonic) pairs, and the post
        hook's end (monotonic)."""
        (w0r, w0m), (t0r, t0m), (t1r, t1m), w1m = clock
        name, dim = group
        position = self.ops
        self.ops += 1
        self.profiler.add(name, sorted(ranks), kind, nbytes, w0m, t1m)
        op = groups.ROW_OPS.get(kind)
        if op is not None:
            r = self._shim.OpRecord()
            r.rank, r.host, r.seq = self.rank, self.host, position
            r.group, r.kind, r.op = name, "world" if dim == "mgmt" else dim, op
            r.group_size, r.bytes = len(ranks), nbytes
            r.wait_start_ns, r.start_ns, r.end_ns = w0r, t0r, t1r
            r.duration_ns = t1m - t0m
            r.wait_ns = (t0m - w0m) + (w1m - t1m)
            # Not modelled as collbench's is: the time this rank spent outside the backend since
            # its previous op (model, optimizer, Python), all of it on the op that follows.
            r.compute_ns = 0 if self.last_end is None else max(0, w0m - self.last_end)
            if decision is not None:
                r.phase = ("fallback" if decision.fallback else "pass" if decision.passed else
                           "reconfigured" if decision.reconfigured else "ready")
                r.reconfigured, r.provisioned = decision.reconfigured, decision.provisioned
                r.fallback, r.barrier = decision.fallback, decision.barrier
                r.topo = ";".join(f"{rail}={t}" for rail, t in sorted(decision.topo.items()))
            self.rows.append((position, r))
        self.last_end = w1m

    def write(self):
        """Steps from the learned step: ops before it are step 0, warm-up (then the learned
        steps count from 1); without one every row is step 0 and a warning says why."""
        self.profiler.finish()
        learned, why = self.profiler.result()
        if learned is None:
            print(f"ocslab: rank {self.rank}: no phase table: {why}; every row is step 0", file=sys.stderr,
                  flush=True)
        for position, r in self.rows:
            if learned is None:
                r.step, r.index = 0, position
            elif position < learned.warmup_ops:
                r.step, r.index, r.warmup = 0, position, True
            else:
                step, r.index = divmod(position - learned.warmup_ops, learned.ops)
                r.step = step + (1 if learned.warmup_ops else 0)
        os.makedirs(self.folder, exist_ok=True)
        self._shim.write_rank_rows(self.folder, self.rank, [r for _, r in self.rows])
        if learned is not None:
            learned.write_csv(os.path.join(self.folder, f"phases-rank{self.rank}.csv"))
