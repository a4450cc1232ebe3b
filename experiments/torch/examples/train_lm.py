#!/usr/bin/python3
"""A small transformer language model trained data parallel x pipeline parallel in plain
PyTorch: 2 pipeline stages (embedding + first half of the decoder blocks | second half + head),
micro-batches whose activations and gradients cross between stages with send/recv, gradients
averaged over each stage's data-parallel group with all_reduce. Synthetic data from a fixed
seed, so two runs with the same seed print the same losses.

Ranks are separate processes with PyTorch's environment contract (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT); ranks are stage-major (stage = rank // dp). It prints one line per
step from the last stage: `step N loss X` (the loss averaged over the data-parallel replicas).
"""

import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

STAGES = 2


class Block(nn.Module):
    """A pre-norm decoder block: causal self-attention and an MLP."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(h, dim=2)
        q, k, v = (y.view(b, t, self.heads, h // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.heads)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


class Stage0(nn.Module):
    def __init__(self, vocab, seq, hidden, heads, blocks):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.Sequential(*[Block(hidden, heads) for _ in range(blocks)])

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return self.blocks(self.tok(tokens) + self.pos(pos))


class Stage1(nn.Module):
    def __init__(self, vocab, hidden, heads, blocks):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(hidden, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.head(self.norm(self.blocks(x)))


def batch(args, step, replica, device):
    """Tokens of a fixed random bigram chain (learnable), the same for both stages of a replica."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 101 + replica)
    successor = torch.randperm(args.vocab, generator=torch.Generator().manual_seed(args.seed))
    tokens = torch.empty(args.batch, args.seq + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(args.vocab, (args.batch,), generator=g)
    for i in range(1, args.seq + 1):
        noise = torch.rand(args.batch, generator=g) < 0.1
        tokens[:, i] = torch.where(noise, torch.randint(args.vocab, (args.batch,), generator=g),
                                   successor[tokens[:, i - 1]])
    return tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="gloo")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--micro-batches", type=int, default=2)
    p.add_argument("--batch", type=int, default=8, help="sequences per replica and step")
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--blocks", type=int, default=2, help="decoder blocks per stage")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    if args.batch % args.micro_batches:
        p.error(f"--batch {args.batch} is not a multiple of --micro-batches {args.micro_batches}")

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % STAGES:
        raise SystemExit(f"world size {world}: want a multiple of {STAGES} (stages)")
    dp = world // STAGES
    stage, replica = divmod(rank, dp)
    dp_groups = [dist.new_group([s * dp + i for i in range(dp)]) for s in range(STAGES)]
    dp_group = dp_groups[stage]
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))

    # Every rank builds both stages from the same seed and keeps its own: the replicas start equal.
    torch.manual_seed(args.seed)
    first = Stage0(args.vocab, args.seq, args.hidden, args.heads, args.blocks)
    last = Stage1(args.vocab, args.hidden, args.heads, args.blocks)
    model = (first if stage == 0 else last).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    mb = args.batch // args.micro_batches
    shape = (mb, args.seq, args.hidden)

    for step in range(args.steps):
        tokens, targets = batch(args, step, replica, device)
        opt.zero_grad()
        loss_sum = torch.zeros(1, device=device)
        if stage == 0:  # all forwards, then all backwards (GPipe)
            outs = []
            for m in range(args.micro_batches):
                y = model(tokens[m * mb:(m + 1) * mb])
                dist.send(y.detach().contiguous(), rank + dp)
                outs.append(y)
            for y in outs:
                grad = torch.empty(shape, device=device)
                dist.recv(grad, rank + dp)
                y.backward(grad)
        else:  # a send completes when its receiver took it: receive every micro-batch first
            xs = []
            for m in range(args.micro_batches):
                x = torch.empty(shape, device=device)
                dist.recv(x, rank - dp)
                xs.append(x.requires_grad_())
            for m, x in enumerate(xs):
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, args.vocab), targets[m * mb:(m + 1) * mb].reshape(-1))
                (loss / args.micro_batches).backward()
                dist.send(x.grad.contiguous(), rank - dp)
                loss_sum += loss.detach() / args.micro_batches
        # One all-reduce per stage and step: the gradients, and the loss riding along.
        grads = [q.grad for q in model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads] + [loss_sum])
        dist.all_reduce(flat, group=dp_group)
        flat /= dp
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        opt.step()
        if stage == STAGES - 1 and replica == 0:
            print(f"step {step} loss {flat[-1].item():.8f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
