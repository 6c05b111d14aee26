"""One member of a 2-rank shm group is killed with SIGKILL while a 64 MiB all_reduce it issued is
unfinished (run by test_shm). No sleeps: rank 1 issues the all_reduce (its part waits for rank
0's), says so in a file named by argv[1] (with its pid), and kills itself; rank 0 waits for the
file and for rank 1 to be gone, then issues its part, which can never complete. Rank 0 prints
the error."""

import os
import signal
import sys

import c10d_func
import torch
from process_sync import exited, mark, until

ops = torch.ops.c10d_func
rank = int(os.environ["RANK"])
issued = sys.argv[1]
ops.wait_tensor(ops.all_reduce(torch.ones(4), "sum", "", [0, 1], 2))  # the segment exists now
assert c10d_func.groups()[0]["backend"] == "shm", c10d_func.groups()
print("segment formed", flush=True)
x = torch.ones(16 << 20)  # 64 MiB
if rank == 1:
    out = ops.all_reduce(x, "sum", "", [0, 1], 2)
    mark(issued, str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)


until(lambda: os.path.exists(issued), "rank 1's file")
with open(issued) as file:
    peer = int(file.read())
until(lambda: exited(peer), "rank 1's death")
try:
    ops.wait_tensor(ops.all_reduce(x, "sum", "", [0, 1], 2))
    print("RESULT no error", flush=True)
except RuntimeError as error:
    print(f"RESULT {error}", flush=True)
sys.exit(0)
