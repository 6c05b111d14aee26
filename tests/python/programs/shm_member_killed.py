"""One member of a 2-rank shm group is killed with SIGKILL during a 64 MiB all_reduce (run by
test_shm). Rank 0 prints how long it took to fail and the error; rank 1 kills itself."""

import os
import signal
import sys
import time

import c10d_func
import torch

ops = torch.ops.c10d_func
rank = int(os.environ["RANK"])
ops.wait_tensor(ops.all_reduce(torch.ones(4), "sum", "", [0, 1], 2))  # the segment exists now
assert c10d_func.groups()[0]["backend"] == "shm", c10d_func.groups()
print("segment formed", flush=True)
x = torch.ones(16 << 20)  # 64 MiB
start = time.monotonic()
out = ops.all_reduce(x, "sum", "", [0, 1], 2)
if rank == 1:
    time.sleep(0.01)  # the collective is under way on the progress thread
    os.kill(os.getpid(), signal.SIGKILL)
try:
    ops.wait_tensor(out)
    print("RESULT no error", flush=True)
except RuntimeError as error:
    print(f"RESULT {time.monotonic() - start:.2f} {error}", flush=True)
sys.exit(0)
