"""One rank of a small job running many shm collectives with values unique to the job (run by
test_shm, two jobs at once on one host). Exits 0 when every result matched its reference."""

import os
import sys

import c10d_func
import torch

ops = torch.ops.c10d_func
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
job = int(sys.argv[1])
ranks = list(range(world))
for step in range(200):
    n = 5 + (step * 7919) % 50000
    x = torch.full((n,), float(1000 * job + 10 * rank + step % 7))
    got = ops.wait_tensor(ops.all_reduce(x, "sum", "", ranks, world))
    want = sum(1000 * job + 10 * r + step % 7 for r in ranks)
    if not torch.all(got == want):
        print(f"job {job} step {step}: got {got[:3].tolist()} want {want}", flush=True)
        sys.exit(1)
    gathered = ops.wait_tensor(ops.all_gather_into_tensor(x[:5], "", ranks, world))
    if gathered.view(world, 5)[:, 0].tolist() != [
        float(1000 * job + 10 * r + step % 7) for r in ranks
    ]:
        print(f"job {job} step {step}: gather {gathered.tolist()}", flush=True)
        sys.exit(1)
assert c10d_func.groups()[0]["backend"] == "shm"
print("job ok", flush=True)
