"""Unit test of the ocslab torch backend's NCCL path on a machine without a GPU: the inner
backend is faked only at torch's ProcessGroup interface (a ProcessGroupNCCL stand-in that
records how it was made and each call, and completes at once), and the backend is told that
its tensors live on CUDA. Everything else is the real backend: its groups and pair groups, the
prefix stores, the op accounting and the rows the rank writes (ocslab.rows over the C++
profiler). Needs torch and the build's ocslab package (PYTHONPATH)."""

import csv
import datetime
import os
import tempfile
import unittest

import torch
import torch.distributed as dist


class FakeWork(dist.Work):
    def wait(self, timeout=None):
        return True


class FakeNCCL:
    """What the backend calls on an inner ProcessGroupNCCL: made with (store, rank, size,
    timeout), then ProcessGroup methods; every call is recorded, none moves data."""

    made = []

    def __init__(self, store, rank, size, timeout):
        store.set("probe", "1")  # a usable store: the group's prefix store
        FakeNCCL.made.append((rank, size))
        self.calls = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append(name)
            return FakeWork()

        return call


class NcclPathTest(unittest.TestCase):
    def test_groups_pairs_and_rows_over_a_faked_nccl(self):
        from ocslab import torch_backend as tb

        with tempfile.TemporaryDirectory() as folder:
            os.environ.update({"OCSLAB_LAYOUT": "pp=2,dp=2", "OCSLAB_OUTPUT": folder, "OCSLAB_RANK_IFS": "ib0,ib0,ib0,ib0"})
            saved = (getattr(dist, "ProcessGroupNCCL", None), tb._inner_kind)
            dist.ProcessGroupNCCL, tb._inner_kind = FakeNCCL, lambda device: "nccl"
            try:
                store = dist.HashStore()
                timeout = datetime.timedelta(seconds=5)
                world = tb.OcslabProcessGroup(store, 0, 4, timeout)  # rank 0 of DP=2 x PP=2
                dp = tb.OcslabProcessGroup(store, 0, 2, timeout)
                dist.distributed_c10d._pg_group_ranks[dp] = {0: 0, 1: 1}  # stage 0's DP group
                grads = torch.ones(1000)  # 4000 bytes
                dp.allreduce([grads], dist.AllreduceOptions()).wait()
                dp.allreduce([grads], dist.AllreduceOptions()).wait()
                world.send([torch.ones(256)], 2, 0).wait()  # to rank 2: the pipeline pair 0-2
                world.recv([torch.ones(256)], 2, 0).wait()
                # One inner NCCL group per torch group, made at its first op: the DP group as
                # rank 0 of 2, the world's pair 0-2 as rank 0 of 2; the world itself never ran an op.
                self.assertEqual(FakeNCCL.made, [(0, 2), (0, 2)])
                self.assertEqual(dp._inner[("nccl", None)].calls, ["allreduce", "allreduce"])
                self.assertEqual(world._inner[("nccl", (0, 2))].calls, ["send", "recv"])
                self.assertNotIn(("gloo", None), dp._inner)
                tb._process.close()
            finally:
                dist.ProcessGroupNCCL, tb._inner_kind = saved
                del dist.distributed_c10d._pg_group_ranks[dp]
            with open(os.path.join(folder, "ops-rank0.csv")) as f:
                rows = [(r["group"], r["kind"], r["op"], r["bytes"]) for r in csv.DictReader(f)]
        # The rows the shim accounting gives: the DP all-reduces on g0.1 (nccl-tests' bytes), the
        # send and the receive on the pipeline pair g0.2.
        self.assertEqual(rows, [("g0.1", "dp", "allreduce", "4000"), ("g0.1", "dp", "allreduce", "4000"),
                                ("g0.2", "pp", "sendrecv", "1024"), ("g0.2", "pp", "sendrecv", "1024")])


if __name__ == "__main__":
    unittest.main()
