"""One rank skips a collective: the others time out, every rank dumps torch's flight recorder.

Launched once per rank (env:// world) with TORCH_FR_BUFFER_SIZE and TORCH_FR_DUMP_TEMP_FILE set.
Argument: "backend" (classic calls on a c10d_func group) or "functional" (c10d_func's ops). The
last rank skips the third all_reduce and waits for its own dump (asked for by the ranks that
time out); the others report their error. Prints "dumped" once this rank's dump exists; rank 0
then runs torch's analyzer (torch.distributed.flight_recorder.fr_trace) on every rank's dump.
"""

import datetime
import os
import pickle
import sys
import time

import c10d_func
import torch
import torch.distributed as dist

mode = sys.argv[1]
rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
group = dist.new_group(backend="c10d_func", timeout=datetime.timedelta(seconds=3))
ranks = list(range(world_size))


def all_reduce(t: torch.Tensor) -> None:
    if mode == "backend":
        dist.all_reduce(t, group=group)
    else:
        c10d_func.functional.all_reduce(t, "sum", ranks, tag="skips").wait()


for step in range(3):
    if step == 2 and rank == world_size - 1:
        break  # the skipped collective
    try:
        all_reduce(torch.full((4, 2), float(step)))
    except Exception as error:  # noqa: BLE001 - reported to the test
        print("failed:", str(error).splitlines()[0], flush=True)
        break

# A hung job stays up: every rank waits for every dump (rank 0's store serves the requests).
dumps = [os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(r) for r in ranks]


def complete(path: str) -> bool:
    """The dump is whole: torch writes it in place, so it exists before it unpickles."""
    try:
        with open(path, "rb") as file:
            pickle.load(file)
        return True
    except (OSError, EOFError, pickle.UnpicklingError):
        return False


# Bounded by the test's own timeout on this process. This process's dump must be whole before
# it exits (its writer is a thread of this process); rank 0 analyzes them all, so waits for all.
needed = dumps if rank == 0 else [dumps[rank]]
deadline = time.monotonic() + 30
while not (all(map(os.path.exists, dumps)) and all(map(complete, needed))):
    if time.monotonic() > deadline:
        break
    time.sleep(0.05)
print("dumped" if complete(dumps[rank]) else "no dump", flush=True)
if rank == 0:
    # torch's analyzer on every rank's dump, here rather than in a process of its own that would
    # import torch again: its report goes to this rank's stdout and stderr.
    from torch.distributed.flight_recorder.fr_trace import main as analyze

    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    try:
        analyze([os.path.dirname(prefix), "-p", os.path.basename(prefix)])
    except AssertionError as refused:  # torch 2.11's reads NCCL and XCCL names only
        print(f"analyzer refused: {refused}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
os._exit(0)  # the failed group's members are out of step: no orderly teardown
