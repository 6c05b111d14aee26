"""Rank 0 runs with C10D_FUNC_DEBUG=DETAIL, the others without (run by test_errors). The check
compares every member's calls through the store, so on some members only it would wait for the
others' calls until the timeout, and they for its collective.

- A group c10d_func forms: every member fails at once, at the formation, naming each member's
  setting, and again at the group's next call (the members meet again).
- A group of backend "c10d_func": the same, at its first collective (its communicator forms
  then), through `dist.all_reduce`.
- A message channel (c10d_func.isend / irecv): the same, at its wait.
- A bound ProcessGroup (formed by torch, not by c10d_func): rank 0's check fails at
  C10D_FUNC_TIMEOUT naming the members that never published their call and why they may not;
  the others' Gloo collective fails at the group's timeout.

Each rank prints lines starting with RESULT."""

import datetime
import os

rank = int(os.environ["RANK"])
if rank == 0:
    os.environ["C10D_FUNC_DEBUG"] = "DETAIL"  # read on the first collective, below

import c10d_func
import torch
import torch.distributed as dist

ops = torch.ops.c10d_func
world = list(range(int(os.environ["WORLD_SIZE"])))


def error_of(call) -> str:
    try:
        call()
        return "no error"
    except RuntimeError as error:
        return str(error).replace("\n", " ")


# c10d_func's world is torch's default group's (its store).
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))


def formed() -> None:
    ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", "", world, len(world)))


def backend_group() -> None:
    dist.all_reduce(torch.ones(2), group=dist.new_group(backend="c10d_func"))


def message() -> None:
    if rank == 0:
        c10d_func.isend(torch.ones(2), 1, world).wait()
    else:
        c10d_func.irecv(torch.empty(2), 0, world).wait()


def bound() -> None:
    c10d_func.all_reduce(torch.ones(2), "sum", dist.group.WORLD).wait()


print("RESULT formation:", error_of(formed), flush=True)
print("RESULT next call:", error_of(formed), flush=True)
print("RESULT backend group:", error_of(backend_group), flush=True)
print("RESULT message:", error_of(message), flush=True)
print("RESULT bound group:", error_of(bound), flush=True)
