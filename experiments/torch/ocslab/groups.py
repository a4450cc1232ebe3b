"""What the shim is told about a torch.distributed op: the group's identity, its dimension in
the job layout, the op's name and its bytes. Pure Python (no torch, no C++), so the accounting
is unit-tested on its own (tests/unit/torch/test_groups.py).
"""

from dataclasses import dataclass


class LayoutError(ValueError):
    """A layout string or a process group the job layout cannot serve."""


@dataclass(frozen=True)
class Layout:
    """The job layout the controller was started with (its `pp:` and `dims:`): ranks are
    numbered stage-major, and inside a stage mixed-radix with the first dimension varying
    fastest (docs/phase-control.md, "The model")."""

    pp: int
    dims: tuple  # ((name, size), ...) in the controller's order

    @staticmethod
    def parse(text, world):
        """"pp=2,dp=2" (pp first, then the symmetric dimensions in the controller's order);
        the product must be the world size."""
        pp, dims = None, []
        for part in [p.strip() for p in text.split(",") if p.strip()]:
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq or not value.strip().isdigit() or int(value) < 1:
                raise LayoutError(f"layout '{text}': '{part}' is not NAME=SIZE with SIZE >= 1")
            if name == "pp":
                if pp is not None or dims:
                    raise LayoutError(f"layout '{text}': pp must come first, once")
                pp = int(value)
            elif any(n == name for n, _ in dims):
                raise LayoutError(f"layout '{text}': dimension '{name}' given twice")
            else:
                dims.append((name, int(value)))
        if pp is None:
            raise LayoutError(f"layout '{text}': no pp=N (the number of pipeline stages)")
        size = pp
        for _, s in dims:
            size *= s
        if size != world:
            raise LayoutError(f"layout '{text}': {size} ranks, but the world has {world}")
        return Layout(pp, tuple(dims))

    @property
    def ranks_per_stage(self):
        n = 1
        for _, s in self.dims:
            n *= s
        return n

    def coords(self, rank):
        """(stage, (coordinate per symmetric dimension, ...))."""
        stage, local = divmod(rank, self.ranks_per_stage)
        c = []
        for _, s in self.dims:
            local, x = divmod(local, s)
            c.append(x)
        return stage, tuple(c)

    def dim_of(self, ranks):
        """The shim dimension of a group of global ranks: "pp" for ranks of distinct stages at
        the same place in each, else the symmetric dimension along which the ranks of one stage
        differ. Raises LayoutError naming the group for any other set of ranks."""
        ranks = sorted(ranks)
        cs = [self.coords(r) for r in ranks]
        stages = {s for s, _ in cs}
        if len(stages) == len(ranks) and len({c for _, c in cs}) == 1:
            return "pp"
        if len(stages) == 1:
            varying = [i for i in range(len(self.dims)) if len({c[i] for _, c in cs}) > 1]
            if len(varying) == 1:
                return self.dims[varying[0]][0]
        raise LayoutError(f"process group {group_name(ranks)} (ranks {ranks}) is neither one stage's ring along "
                          f"one dimension nor a pipeline group of layout {self.describe()}: no rail serves it")

    def describe(self):
        return ",".join([f"pp={self.pp}"] + [f"{n}={s}" for n, s in self.dims])


def shim_group(ranks, world, p2p, layout):
    """(name, dim) of the shim group an op runs on, or None when nothing crosses the fabric
    (a group of one rank). A collective of the whole world is the management group "world"
    (bootstrap, barriers, metrics: it never reconfigures, as collbench's world groups); a
    point-to-point op is given the pair of its two ranks."""
    ranks = sorted(ranks)
    if len(ranks) < 2:
        return None
    if not p2p and len(ranks) == world:
        return "world", "mgmt"
    return group_name(ranks), layout.dim_of(ranks)


def group_name(ranks):
    """A group's identity at the controller: its sorted global ranks ("g0.2"). Two torch
    groups of the same ranks are the same shim group, and a point-to-point op is the pair
    group of its two ranks whichever torch group carried it (as collbench's pair groups)."""
    return "g" + ".".join(str(r) for r in sorted(ranks))


def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


# torch ProcessGroup method -> the shim's op type (collbench's names where one exists).
OP_TYPES = {
    "allreduce": "allreduce",
    "allreduce_coalesced": "allreduce",
    "allgather": "allgather",
    "_allgather_base": "allgather",
    "allgather_coalesced": "allgather",
    "reduce_scatter": "reducescatter",
    "_reduce_scatter_base": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "alltoall": "alltoall",
    "alltoall_base": "alltoall",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "recv_anysource": "recv",
}


# The shim's op type -> collbench's `op` column (ops-rank<R>.csv): a send and a recv are the two
# ends of one sendrecv, as in collbench's rows. Types without one (broadcast, reduce, gather,
# scatter, alltoall) are profiled but get no row.
ROW_OPS = {
    "allreduce": "allreduce",
    "allgather": "allgather",
    "reducescatter": "reducescatter",
    "barrier": "barrier",
    "send": "sendrecv",
    "recv": "sendrecv",
}


def op_bytes(method, inputs, outputs=()):
    """nccl-tests' size, as collbench's `bytes` (docs/workloads.md): allreduce, broadcast,
    reduce = the buffer; allgather, gather = the gathered output; reducescatter, scatter = the
    full input; alltoall = the input; send/recv = the message; barrier = 0. `inputs` and
    `outputs` are flat lists of tensors (anything with numel() and element_size())."""
    kind = OP_TYPES[method]
    if kind == "barrier":
        return 0
    if kind in ("allgather", "gather"):
        return tensor_bytes(outputs) if outputs else tensor_bytes(inputs)
    if kind == "scatter":
        return tensor_bytes(inputs) if inputs else tensor_bytes(outputs)
    return tensor_bytes(inputs)


def parse_group_ifs(text, layout):
    """OCSLAB_GROUP_IF: "world=lan0,pp=eth1,dp=eth1", the network interface each kind of group
    binds its inner gloo connections to (`world`: collectives of the whole world; `pp` and the
    layout's dimensions: its data groups, whose circuits the controller makes). A kind not named
    keeps gloo's own choice (GLOO_SOCKET_IFNAME, else the host name's address). Returns
    {kind: interface}; raises LayoutError naming the bad part."""
    kinds = ["world", "pp"] + [n for n, _ in layout.dims]
    out = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        kind, eq, iface = (x.strip() for x in part.partition("="))
        if not eq or not iface:
            raise LayoutError(f"'{part}' is not KIND=INTERFACE")
        if kind not in kinds:
            raise LayoutError(f"'{part}': group kind '{kind}' is not one of {', '.join(kinds)} "
                              f"(layout {layout.describe()})")
        if kind in out:
            raise LayoutError(f"'{part}': group kind '{kind}' given twice")
        if not _interface_name(iface):
            raise LayoutError(f"'{part}': '{iface}' is not a network interface name")
        out[kind] = iface
    return out


def parse_rank_ifs(text, world):
    """OCSLAB_RANK_IFS: "eth1,eth1,eth1,eth1", every rank's data NIC in rank order (the runner's
    placement), the interface a data group binds to where OCSLAB_GROUP_IF names none for its
    kind. Returns the list; raises LayoutError naming the bad part."""
    names = [n.strip() for n in text.split(",")]
    if len(names) != world:
        raise LayoutError(f"'{text}': {len(names)} interface(s), but the world has {world} ranks")
    for r, n in enumerate(names):
        if not _interface_name(n):
            raise LayoutError(f"rank {r}: '{n}' is not a network interface name")
    return names


def _interface_name(name):
    """A name as the kernel takes it: 1..15 characters, no '/', ':', ',', '=' or white space."""
    return 0 < len(name) <= 15 and not any(c in "/:,=" or c.isspace() for c in name)
