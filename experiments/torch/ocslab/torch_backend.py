"""The torch.distributed backend "ocslab": every collective and point-to-point op of every
process group goes through the phase shim (the C++ ocslab::phase::Shim, via ocslab._shim)
before and after it runs; the data itself moves through an inner gloo (CPU tensors) or NCCL
(CUDA tensors) process group. docs/workloads.md, "Your own PyTorch job".

Importing this module registers the backend. To run a script that must not mention ocslab,
start it through the module: `python3 -m ocslab.torch_backend train.py --backend ocslab ...`.

Environment (the names of the collective workloads' flags, docs/workloads.md):
  OCSLAB_CONTROLLER=HOST:PORT        the job's controller; unset: pass-through (said once on stderr)
  OCSLAB_JOB=NAME                    the job the controller runs
  OCSLAB_CONTROLLER_TOKEN_FILE=FILE  its token (mode 0600), else $OCSLAB_CONTROLLER_TOKEN
  OCSLAB_LAYOUT=pp=2,dp=2            the controller's job layout (pp, then its dims in order)
  OCSLAB_ACK_WAIT_MS=N               how long a hook waits for the controller (default 60000)
  OCSLAB_SHIM_CSV=FILE               the shim's Samples at exit ("{rank}" -> the rank)
  OCSLAB_OUTPUT=DIR                  at exit, collbench's rows: DIR/ops-rank<R>.csv,
                                     DIR/timeline-rank<R>.csv and the learned DIR/phases-rank<R>.csv
  OCSLAB_PHASE_MODE=MODE             on-demand (default) or provisioning, as --phase-mode
  OCSLAB_PROFILE_STEPS=N             how often the step must repeat to be learned (default 5)
  OCSLAB_RANK_IFS=eth1,eth1,...      every rank's data NIC, in rank order: a data group's inner gloo
                                     group binds to its rank's (where the group's circuits are)
  OCSLAB_GROUP_IF=world=lan0,pp=eth1 the interface a kind of group binds to instead (world, pp, the
                                     layout's dimensions); world unnamed: gloo's own choice
"""

import atexit
import os
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist

from ocslab import groups, rows

BACKEND = "ocslab"


class ControllerError(RuntimeError):
    """The controller configuration is wrong or the controller refused or cannot be reached:
    raised by init_process_group, before the job's first step."""


# Longest flag first: --controller is a prefix of --controller-token-file.
_FLAGS = (("OCSLAB_CONTROLLER_TOKEN_FILE", "--controller-token-file"), ("OCSLAB_CONTROLLER", "--controller"),
          ("OCSLAB_JOB", "--job"), ("OCSLAB_PHASE_MODE", "--phase-mode"))


def _env_args():
    """The collective workloads' controller flags, from the environment."""
    args = []
    for env, flag in _FLAGS:
        value = os.environ.get(env)
        if value:
            args += [flag, value]
    return args


def _env_names(message):
    """The shim's parser names its flags; here they came from the environment."""
    for env, flag in _FLAGS:
        message = message.replace(flag, env)
    return message


def _layout(world):
    try:
        return groups.Layout.parse(os.environ.get("OCSLAB_LAYOUT", ""), world)
    except groups.LayoutError as e:
        raise ValueError(f"OCSLAB_LAYOUT: {e}") from None


def _group_ifs(world):
    """({kind: interface} from OCSLAB_GROUP_IF, [each rank's interface] from OCSLAB_RANK_IFS or
    None); both need OCSLAB_LAYOUT, whose kinds they serve."""
    text, ranks = os.environ.get("OCSLAB_GROUP_IF", "").strip(), os.environ.get("OCSLAB_RANK_IFS", "").strip()
    if not text and not ranks:
        return {}, None
    layout = _layout(world)
    try:
        by_kind = groups.parse_group_ifs(text, layout) if text else {}
    except groups.LayoutError as e:
        raise ValueError(f"OCSLAB_GROUP_IF: {e}") from None
    try:
        by_rank = groups.parse_rank_ifs(ranks, world) if ranks else None
    except groups.LayoutError as e:
        raise ValueError(f"OCSLAB_RANK_IFS: {e}") from None
    return by_kind, by_rank


def _profile_steps():
    steps = os.environ.get("OCSLAB_PROFILE_STEPS", "5")
    if not steps.isdigit() or int(steps) < 1:
        raise ValueError(f"OCSLAB_PROFILE_STEPS '{steps}': want a number of steps >= 1")
    return int(steps)


def _recorder(rank):
    folder = os.environ.get("OCSLAB_OUTPUT")
    if not folder:
        return None
    steps = _profile_steps()
    try:
        return rows.Recorder(rank, folder, steps)
    except ImportError as e:
        raise ControllerError(f"ocslab backend, rank {rank}: OCSLAB_OUTPUT needs the shim's C++ module ({e}); "
                              f"it is built where pybind11 and the Python headers are installed "
                              f"(docs/install.md)") from None


class _Process:
    """What all process groups of this process share: the one shim connection (one rank =
    one shim, as in the C++ workloads), the groups registered with it, the op counter."""

    def __init__(self, rank, world):
        self.rank = rank
        self.world = world
        self.shim = None
        self.shim_step_unknown = -1
        self.layout = None
        self.registered = set()
        # One op at a time through the shim: it is not thread-safe, and a rank's ops must reach
        # the controller in the order the rank runs them.
        self.lock = threading.Lock()
        self.csv = None
        self.group_ifs, self.rank_ifs = {}, None
        try:
            self.group_ifs, self.rank_ifs = _group_ifs(world)
            if self.group_ifs or self.rank_ifs:
                self.layout = _layout(world)
            self.recorder = _recorder(rank)
            if self.recorder is not None:
                self.layout = _layout(world)
        except ValueError as e:
            raise ControllerError(f"ocslab backend, rank {rank}: {e}") from None
        if self.recorder is not None:
            atexit.register(self.close)
        if not os.environ.get("OCSLAB_CONTROLLER"):
            print(f"ocslab: rank {rank}: no controller (OCSLAB_CONTROLLER unset): backend ocslab passes every op "
                  f"to its inner gloo/NCCL group unchanged", file=sys.stderr, flush=True)
            return
        self._connect()

    def _connect(self):
        where = os.environ["OCSLAB_CONTROLLER"]
        try:
            from ocslab import _shim  # the C++ module: needed only with a controller
        except ImportError as e:
            raise ControllerError(f"ocslab backend, rank {self.rank}, controller {where}: the shim's C++ module "
                                  f"is missing ({e}); it is built where pybind11 and the Python headers are "
                                  f"installed (docs/install.md)") from None
        try:
            self.layout = _layout(self.world)
            ack_wait = os.environ.get("OCSLAB_ACK_WAIT_MS", "60000")
            if not ack_wait.isdigit():
                raise ValueError(f"OCSLAB_ACK_WAIT_MS '{ack_wait}': want milliseconds")
            options = _shim.shim_options(_env_args(), self.rank, self.world, socket.gethostname(), int(ack_wait),
                                         _profile_steps())
            self.shim = _shim.Shim(options)
            self.shim_step_unknown = _shim.STEP_UNKNOWN
        except (ValueError, _shim.ShimError) as e:
            why = _env_names(str(e))
            raise ControllerError(f"ocslab backend, rank {self.rank}, controller {where}: {why}") from None
        self.csv = os.environ.get("OCSLAB_SHIM_CSV", "").replace("{rank}", str(self.rank)) or None
        if self.recorder is None:
            atexit.register(self.close)

    def close(self):
        with self.lock:
            if self.recorder is not None:
                self.recorder.write()
                self.recorder = None
            if self.shim is None:
                return
            if self.csv:
                self.shim.write_csv(self.csv)
            for r in self.shim.reports:
                print(f"ocslab: rank {self.rank}: {r}", file=sys.stderr, flush=True)
            self.shim.close()
            self.shim = None

    def interface(self, ranks, p2p):
        """The interface of the group of these global ranks: what OCSLAB_GROUP_IF names for its
        kind (world, pp or a dimension), else for a data group this rank's OCSLAB_RANK_IFS
        entry, else None (gloo's own choice)."""
        if not self.group_ifs and not self.rank_ifs:
            return None
        g = groups.shim_group(ranks, self.world, p2p, self.layout)
        if g is None:
            return None
        kind = "world" if g[1] == "mgmt" else g[1]
        if kind in self.group_ifs:
            return self.group_ifs[kind]
        return self.rank_ifs[self.rank] if self.rank_ifs and kind != "world" else None

    def run(self, group, kind, nbytes, op):
        """op() between the shim's pre and post hooks. The op is complete when this returns:
        the controller counts it in flight from its ACK to its `done` (G2), so `done` must
        not be sent before the data moved."""
        if group is None or (self.shim is None and self.recorder is None):
            work = op()
            work.wait()
            return work
        name, dim, members = group
        with self.lock:
            w0 = (time.time_ns(), time.monotonic_ns())
            decision = None
            if self.shim is not None:
                if name not in self.registered:
                    self.shim.add_group(name, dim, sorted(members))
                    self.registered.add(name)
                # Unmarked: the shim finds the step itself (the same profiler as the rows'), then
                # asks only at its phase boundaries and pipeline sends and provisions after a
                # phase's last op.
                index = self.shim_step_unknown
                decision = self.shim.pre_communication(name, kind, nbytes, index)
            t0 = (time.time_ns(), time.monotonic_ns())
            try:
                work = op()
                work.wait()
            finally:
                t1 = (time.time_ns(), time.monotonic_ns())
                if self.shim is not None:
                    self.shim.post_communication(name, kind, nbytes, index)
            if self.recorder is not None:
                self.recorder.add((name, dim), members, kind, nbytes, decision, (w0, t0, t1, time.monotonic_ns()))
        return work


_process = None


class _Finished(dist.Work):
    """A point-to-point op that already completed: waiting on gloo's send or recv work a second
    time waits for another message, and torch.distributed waits on what send/recv return."""

    def __init__(self, inner):
        super().__init__()
        self._inner = inner

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def source_rank(self):
        return self._inner.source_rank()


def _first_tensor(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, (list, tuple)):
            t = _first_tensor(a)
            if t is not None:
                return t
    return None


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _flat(y)]
    return []


# Where each ProcessGroup method keeps its tensors: (inputs, outputs) from its arguments.
_IO = {
    "allreduce": lambda a: (a[0], ()),
    "allreduce_coalesced": lambda a: (a[0], ()),
    "broadcast": lambda a: (a[0], ()),
    "reduce": lambda a: (a[0], ()),
    "allgather": lambda a: (a[1], a[0]),
    "_allgather_base": lambda a: (a[1], a[0]),
    "allgather_coalesced": lambda a: (a[1], a[0]),
    "reduce_scatter": lambda a: (a[1], a[0]),
    "_reduce_scatter_base": lambda a: (a[1], a[0]),
    "gather": lambda a: (a[1], a[0]),
    "scatter": lambda a: (a[1], a[0]),
    "alltoall": lambda a: (a[1], a[0]),
    "alltoall_base": lambda a: (a[1], a[0]),
    "barrier": lambda a: ((), ()),
}


def _inner_kind(device):
    """The inner backend that carries a tensor on this device: NCCL for CUDA, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


class OcslabProcessGroup(dist.ProcessGroup):
    """One torch process group. Its inner groups are made at its first op, after the shim's
    pre hook returned: only then do its circuits exist (docs/workloads.md)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        global _process
        if _process is None:  # the first group is the world, made by init_process_group
            _process = _Process(rank, size)
        self._store = store
        self._timeout = timeout
        self._inner = {}  # (kind, pair or None) -> inner ProcessGroup
        self._ranks = None

    def getBackendName(self):
        return BACKEND

    def global_ranks(self):
        """The group's global ranks, in group-rank order (torch records them after the creator
        returned, so they are looked up at the first op)."""
        if self._ranks is None:
            mapping = dist.distributed_c10d._pg_group_ranks.get(self)
            if mapping is None:  # the world group, before init_process_group recorded it
                self._ranks = list(range(self.size()))
            else:
                self._ranks = [g for g, _ in sorted(mapping.items(), key=lambda kv: kv[1])]
        return self._ranks

    def _inner_group(self, device, ranks, p2p, pair=None):
        """The inner gloo or NCCL group of this group, or of a pair of its group ranks (for
        point-to-point ops in a group of more than two: only the pair's circuit exists). A gloo
        group binds to the interface OCSLAB_GROUP_IF names for its kind (`ranks`: its global
        ranks), so a data group connects over its rail NIC, through the circuits its first
        op's pre hook made."""
        kind = _inner_kind(device)
        key = (kind, pair)
        pg = self._inner.get(key)
        if pg is None:
            prefix = f"ocslab/{kind}" + (f"/pair{pair[0]}-{pair[1]}" if pair else "")
            store = dist.PrefixStore(prefix, self._store)
            rank, size = (pair.index(self.rank()), 2) if pair else (self.rank(), self.size())
            if kind == "nccl":
                if not hasattr(dist, "ProcessGroupNCCL"):
                    raise RuntimeError("ocslab backend: CUDA tensor, but this torch has no NCCL")
                pg = dist.ProcessGroupNCCL(store, rank, size, self._timeout)
            else:
                iface = _process.interface(ranks, p2p)
                if iface is None:
                    pg = dist.ProcessGroupGloo(store, rank, size, self._timeout)
                else:
                    options = dist.ProcessGroupGloo._Options()
                    options._timeout = self._timeout
                    try:
                        options._devices = [dist.ProcessGroupGloo.create_device(interface=iface)]
                    except RuntimeError as e:
                        raise RuntimeError(f"ocslab backend, rank {_process.rank}: group {groups.group_name(ranks)}: "
                                           f"interface {iface} (OCSLAB_GROUP_IF): {e}") from None
                    pg = dist.ProcessGroupGloo(store, rank, size, options)
            self._inner[key] = pg
        return pg

    def _collective(self, method, *args, **kwargs):
        ranks = self.global_ranks()
        inputs, outputs = _IO[method](args)
        inputs, outputs = _flat(inputs), _flat(outputs)
        tensor = (inputs or outputs or [None])[0]
        device = tensor.device if tensor is not None else torch.device("cpu")
        group = self._shim_group(ranks, p2p=False)
        nbytes = groups.op_bytes(method, inputs, outputs)

        def op():
            return getattr(self._inner_group(device, ranks, p2p=False), method)(*args, **kwargs)

        return _process.run(group, groups.OP_TYPES[method], nbytes, op)

    def _p2p(self, method, tensors, peer, tag):
        ranks = self.global_ranks()
        me, other = ranks[self.rank()], ranks[peer]
        group = self._shim_group([me, other], p2p=True)
        # A group of two is its own pair; in a larger one only the pair's circuit exists.
        pair = None if self.size() == 2 else tuple(sorted((self.rank(), peer)))
        peer_rank = peer if pair is None else pair.index(peer)

        def op():
            return getattr(self._inner_group(tensors[0].device, [me, other], True, pair), method)(tensors, peer_rank, tag)

        return _Finished(_process.run(group, method, groups.tensor_bytes(tensors), op))

    @staticmethod
    def _shim_group(ranks, p2p):
        if _process.shim is None and _process.recorder is None:
            return None
        g = groups.shim_group(ranks, _process.world, p2p, _process.layout)
        return None if g is None else (g[0], g[1], ranks)

    def send(self, tensors, dst, tag=0):
        return self._p2p("send", tensors, dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._p2p("recv", tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("ocslab backend: recv from any source: the shim must know the peer (its circuit) "
                           "before the op; name the source rank")


def _method(name):
    def call(self, *args, **kwargs):
        return self._collective(name, *args, **kwargs)

    call.__name__ = name
    return call


for _name in _IO:
    setattr(OcslabProcessGroup, _name, _method(_name))


def _create(store, rank, size, timeout):
    return OcslabProcessGroup(store, rank, size, timeout)


def register():
    """Registers backend "ocslab" with torch.distributed (done by importing this module)."""
    try:
        dist.Backend.register_backend(BACKEND, _create)
    except Exception as e:  # already registered by an earlier import: keep that one
        if BACKEND.upper() not in dir(dist.Backend):
            raise RuntimeError(f"ocslab backend: cannot register with torch.distributed: {e}") from e


def main(argv):
    """python3 -m ocslab.torch_backend SCRIPT [ARGS...]: runs SCRIPT as __main__ with the
    backend registered, so the script only names it."""
    import runpy

    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print("usage: python3 -m ocslab.torch_backend SCRIPT [ARGS...]  (registers backend 'ocslab', runs SCRIPT)",
              file=sys.stderr)
        return 2
    sys.argv = argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[1])))
    runpy.run_path(argv[1], run_name="__main__")
    return 0


if __name__ == "__main__":
    # Run as `-m`, this file is __main__: the backend is registered by the package module, once.
    from ocslab import torch_backend as _registered

    sys.exit(_registered.main(sys.argv))
else:
    register()
