"""Starts the ranks of a torch.distributed job as local processes with PyTorch's environment
contract (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), as the runner's launchers
do on hosts; shared by the backend's tests."""

import os
import socket
import subprocess
import sys

PYTHON = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(SOURCE, "experiments", "torch", "examples", "train_lm.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(argv, world=4, env=None, timeout=120):
    """Runs `python3 ARGV...` as `world` ranks; returns [(returncode, stdout, stderr)] by rank."""
    port = free_port()
    procs = []
    for rank in range(world):
        e = dict(os.environ)
        e.update(env or {})
        e.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([PYTHON] + argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    results = []
    try:
        for rank, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                outs = [q.communicate() for q in procs]
                raise AssertionError(f"rank {rank} still running after {timeout} s; stderr by rank:\n" +
                                     "\n".join(f"--- rank {r}:\n{e[-2000:]}" for r, (_, e) in enumerate(outs)))
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def losses(results):
    """{step: loss text} from the ranks' `step N loss X` lines."""
    found = {}
    for _, out, _ in results:
        for line in out.splitlines():
            f = line.split()
            if len(f) == 4 and f[0] == "step" and f[2] == "loss":
                found[int(f[1])] = f[3]
    return found
