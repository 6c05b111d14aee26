"""Ranks that exchange messages on backend "c10d_func" and exit right after (run by
test_reliability).

Every rank runs an async all_reduce and waits on it, sends two messages to every other rank,
receives them naming the source and from any source (values checked), then exits at once, with
destroy_process_group ("destroy") or without it ("exit"). The message channels and transports
complete the last calls on threads of their own; Python shutting down while such a thread lets go
of the caller's tensors used to abort the process ("terminate called without an active
exception"). The process must exit 0.
"""

import sys

import c10d_func  # noqa: F401
import torch
import torch.distributed as dist

dist.init_process_group("c10d_func")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.full((1024,), float(rank + 1))
dist.all_reduce(total, async_op=True).wait()
assert total.eq(world * (world + 1) / 2).all(), total
mine = torch.full((64,), float(rank))
for receiver in range(world):
    if receiver != rank:
        dist.send(mine, receiver)
        dist.send(mine, receiver)
        continue
    for sender in range(world):
        if sender == rank:
            continue
        named = torch.empty(64)
        dist.recv(named, src=sender)
        assert named.eq(sender).all(), (sender, named)
        anyone = torch.empty(64)
        source = dist.recv(anyone)
        assert anyone.eq(source).all(), (source, anyone)
print("exchanged", flush=True)
if sys.argv[1] == "destroy":
    dist.destroy_process_group()
