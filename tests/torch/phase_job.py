"""A DP x PP step whose data-parallel phase is three all-reduces in a row (as a job with three
gradient buckets has): the shim's learned step then has phases longer than one op, so O1 shows
(only a phase's first op asks the controller). 4 ranks, stages {0, 1} and {2, 3}; rank 0
prints `step N loss X` from what it received and reduced. argv: BACKEND STEPS."""

import sys

import torch
import torch.distributed as dist

dist.init_process_group(sys.argv[1])
rank, steps = dist.get_rank(), int(sys.argv[2])
dp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
dp = dp_groups[rank // 2]
for step in range(steps):
    torch.manual_seed(1000 * step + rank)
    x = torch.randn(32)
    if rank < 2:
        dist.send(x, rank + 2)
        back = torch.empty(32)
        dist.recv(back, rank + 2)
    else:
        back = torch.empty(32)
        dist.recv(back, rank - 2)
        dist.send(back * 2 + x, rank - 2)
    total = back.sum()
    # Distinct sizes: equal ops in a row would be a shorter period than the step.
    for n in (64, 128, 256):
        t = torch.full((n,), float(rank + step)) + back[: n % 32 + 1].sum()
        dist.all_reduce(t, group=dp)
        total = total + t.sum()
    if rank == 0:
        print(f"step {step} loss {total.item():.8f}", flush=True)
dist.destroy_process_group()
