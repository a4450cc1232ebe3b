"""Unit test of what the ocslab torch backend tells the shim about an op: the job layout, each
group's identity and dimension, and the op's bytes (nccl-tests' size, as collbench's). Pure
Python: neither torch nor the C++ module is imported."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", "torch"))

from ocslab import groups  # noqa: E402
from ocslab.groups import Layout, LayoutError  # noqa: E402


class FakeTensor:
    """numel() and element_size(): all the accounting reads of a tensor."""

    def __init__(self, numel, element_size=4):
        self.n, self.e = numel, element_size

    def numel(self):
        return self.n

    def element_size(self):
        return self.e


class LayoutTest(unittest.TestCase):
    def test_parse_and_coordinates(self):
        lay = Layout.parse("pp=3, dp=2,cp=2", 12)
        self.assertEqual((lay.pp, lay.dims, lay.ranks_per_stage), (3, (("dp", 2), ("cp", 2)), 4))
        # The paper's Figure 8 shape (docs/phase-control.md): stage 1 holds ranks 4..7, rank 6 is dp=0, cp=1.
        self.assertEqual(lay.coords(6), (1, (0, 1)))
        self.assertEqual(lay.coords(11), (2, (1, 1)))
        self.assertEqual(lay.describe(), "pp=3,dp=2,cp=2")

    def test_bad_layouts_name_the_input(self):
        for text, world, words in (("", 4, "no pp=N"), ("dp=2,pp=2", 4, "pp must come first"),
                                   ("pp=2,dp=x", 4, "'dp=x' is not NAME=SIZE"), ("pp=2,dp=0", 4, "'dp=0'"),
                                   ("pp=2,dp=2,dp=1", 4, "'dp' given twice"),
                                   ("pp=2,dp=2", 6, "4 ranks, but the world has 6")):
            with self.assertRaises(LayoutError) as e:
                Layout.parse(text, world)
            self.assertIn(words, str(e.exception), text)


class GroupTest(unittest.TestCase):
    lay = Layout.parse("pp=2,dp=2", 4)

    def test_dp_x_pp_groups(self):
        self.assertEqual(groups.shim_group([1, 0], 4, False, self.lay), ("g0.1", "dp"))
        self.assertEqual(groups.shim_group([2, 3], 4, False, self.lay), ("g2.3", "dp"))
        self.assertEqual(groups.shim_group([0, 2], 4, False, self.lay), ("g0.2", "pp"))
        # A send between stages is the pair group whichever torch group carried it.
        self.assertEqual(groups.shim_group([3, 1], 4, True, self.lay), ("g1.3", "pp"))
        self.assertEqual(groups.shim_group([0, 1, 2, 3], 4, False, self.lay), ("world", "mgmt"))
        self.assertIsNone(groups.shim_group([2], 4, False, self.lay))

    def test_world_pair_sends_are_pipeline_ops(self):
        # Two ranks, two stages: collectives of the world are management, its sends pipeline ops.
        lay = Layout.parse("pp=2", 2)
        self.assertEqual(groups.shim_group([0, 1], 2, False, lay), ("world", "mgmt"))
        self.assertEqual(groups.shim_group([1, 0], 2, True, lay), ("g0.1", "pp"))

    def test_second_dimension(self):
        lay = Layout.parse("pp=1,dp=2,cp=2", 4)  # rank = dp + 2 * cp
        self.assertEqual(lay.dim_of([0, 2]), "cp")
        self.assertEqual(lay.dim_of([1, 3]), "cp")
        self.assertEqual(lay.dim_of([2, 3]), "dp")

    def test_groups_no_rail_serves_are_refused_naming_them(self):
        for ranks in ([0, 3], [0, 1, 2], [1, 2]):
            with self.assertRaises(LayoutError) as e:
                groups.shim_group(ranks, 4, False, self.lay)
            self.assertIn(f"process group {groups.group_name(ranks)} (ranks {sorted(ranks)})", str(e.exception))
            self.assertIn("pp=2,dp=2", str(e.exception))
        lay = Layout.parse("pp=1,dp=2,cp=2", 4)
        with self.assertRaises(LayoutError):  # differs in both dimensions: no one ring
            lay.dim_of([0, 3])


class BytesTest(unittest.TestCase):
    def test_nccl_tests_sizes(self):
        t = [FakeTensor(256)]  # 1 KiB of float32
        self.assertEqual(groups.op_bytes("allreduce", t), 1024)
        self.assertEqual(groups.op_bytes("broadcast", [FakeTensor(10, 8)]), 80)
        gathered = [FakeTensor(256) for _ in range(4)]
        self.assertEqual(groups.op_bytes("allgather", t, gathered), 4096)
        self.assertEqual(groups.op_bytes("_allgather_base", t, [FakeTensor(1024)]), 4096)
        self.assertEqual(groups.op_bytes("reduce_scatter", gathered, t), 4096)
        self.assertEqual(groups.op_bytes("send", t), 1024)
        self.assertEqual(groups.op_bytes("barrier", []), 0)
        # A scatter's root holds the input; the other ranks only know their own piece.
        self.assertEqual(groups.op_bytes("scatter", [], t), 1024)
        self.assertEqual(groups.OP_TYPES["_reduce_scatter_base"], "reducescatter")


class GroupInterfaceTest(unittest.TestCase):
    def test_kinds_and_interfaces(self):
        lay = Layout.parse("pp=2,dp=2", 4)
        self.assertEqual(groups.parse_group_ifs("world=lan0, pp=eth1,dp=eth1", lay),
                         {"world": "lan0", "pp": "eth1", "dp": "eth1"})
        self.assertEqual(groups.parse_group_ifs("", lay), {})

    def test_bad_parts_are_named(self):
        lay = Layout.parse("pp=2,dp=2", 4)
        for text, words in (("tp=eth1", "group kind 'tp' is not one of world, pp, dp"),
                            ("pp", "'pp' is not KIND=INTERFACE"), ("pp=", "'pp=' is not KIND=INTERFACE"),
                            ("pp=eth1,pp=eth2", "'pp' given twice"),
                            ("dp=a/b", "'a/b' is not a network interface name"),
                            ("dp=abcdefghijklmnop", "is not a network interface name")):
            with self.assertRaises(LayoutError) as c:
                groups.parse_group_ifs(text, lay)
            self.assertIn(words, str(c.exception), text)

    def test_rank_interfaces(self):
        self.assertEqual(groups.parse_rank_ifs("eth1, eth1,lo,ib0", 4), ["eth1", "eth1", "lo", "ib0"])
        for text, words in (("eth1,eth1", "2 interface(s), but the world has 4 ranks"),
                            ("eth1,,eth1,eth1", "rank 1: '' is not a network interface name"),
                            ("eth1,eth1,e th,eth1", "rank 2: 'e th'")):
            with self.assertRaises(LayoutError) as c:
                groups.parse_rank_ifs(text, 4)
            self.assertIn(words, str(c.exception), text)


if __name__ == "__main__":
    unittest.main()
