"""A DistributedDataParallel step in plain PyTorch: DDP's reducer calls the process group from
C++, which reaches a Python ProcessGroup's methods only through torch's trampoline. Prints each
rank's gradient sum (`grad X`); argv[1] is the backend."""

import sys

import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group(sys.argv[1])
torch.manual_seed(0)
model = nn.Linear(8, 4)
ddp = nn.parallel.DistributedDataParallel(model)
x = torch.randn(16, 8) * (dist.get_rank() + 1)  # the ranks' gradients differ until averaged
ddp(x).pow(2).mean().backward()
print(f"grad {model.weight.grad.sum().item():.8f}", flush=True)
dist.destroy_process_group()
