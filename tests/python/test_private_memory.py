"""The cache of private host memory (transports/host_block_cache.h) on the transports without
symmetric memory, here Gloo: large outputs, and the snapshots of inputs that Gloo reads after the
call returns, come from blocks that dropped tensors gave back, with no fresh pages. Results are
checked against references computed from every rank's known input, while the caller writes its
input as soon as each call returns and several collectives are in flight at once (a block still
read by one collective must never be handed to the next). groups() reports the cache's
counters; C10D_FUNC_HOST_CACHE_BYTES=0 turns it off and the same calls stay right."""

from __future__ import annotations

import time

import c10d_func
import pytest
import torch
from reference import make_input, reduce_reference
from test_collectives import Checks, assert_no_failures
from worker_pool import WorkerPool

ops = torch.ops.c10d_func

N = 1 << 18  # 1 MiB of float32: over the cache's 128 KiB threshold
# Its own tag: the pooled workers keep the groups other files formed ("private" is on shm in
# test_shm.py), and a formed tag keeps its transport.
TAG = "private-gloo"
MOVES = ("all_gather", "all_to_all", "broadcast")  # exact; reductions within tolerance


def private_counters() -> dict[str, int]:
    (group,) = [g for g in c10d_func.groups() if g["tag"] == TAG and g["device"] == "cpu"]
    assert group["backend"] == "gloo", group
    return {k: v for k, v in group["memory"].items() if k.startswith("private_")}


def issue(rank: int, world_size: int, salt: int) -> tuple[dict, dict]:
    """Every data-moving and reducing op on fresh private inputs (not yet waited), and their
    references; the caller overwrites the inputs right after (the snapshot must protect them)."""
    everyone = list(range(world_size))
    inputs = {m: make_input(m, (N,), torch.float32, salt) for m in everyone}
    mine = inputs[rank].clone()
    block = N // world_size
    issued = {
        "all_reduce": ops.all_reduce(mine, "sum", TAG, everyone, world_size),
        "all_gather": ops.all_gather_into_tensor(mine, TAG, everyone, world_size),
        "reduce_scatter": ops.reduce_scatter_tensor(mine, "sum", TAG, everyone, world_size),
        "all_to_all": ops.all_to_all_single(mine, None, None, TAG, everyone, world_size),
        "broadcast": ops.broadcast(mine, 0, TAG, everyone, world_size),
    }
    mine.fill_(-1.0)  # the caller owns its input again as soon as the ops return
    total = reduce_reference(list(inputs.values()), "sum")
    expected = {
        "all_reduce": total,
        "all_gather": torch.cat([inputs[m] for m in everyone]),
        "reduce_scatter": total[rank * block : (rank + 1) * block],
        "all_to_all": torch.cat([inputs[m][rank * block : (rank + 1) * block] for m in everyone]),
        "broadcast": inputs[0],
    }
    return issued, expected


def body_reuse(rank: int, world_size: int, cached: bool) -> list[str]:
    checks = Checks(rank)
    c10d_func.set_transport("gloo", "cpu", tag=TAG)
    # Two rounds in flight at once, then waited: their blocks are all distinct.
    rounds = [issue(rank, world_size, salt) for salt in (1, 2)]
    for salt, (issued, expected) in zip((1, 2), rounds):
        for op, out in issued.items():
            checks.expect(
                f"{op} #{salt} (in flight with another round)",
                ops.wait_tensor(out),
                expected[op],
                exact=op in MOVES,
            )
    del rounds, issued, expected, out
    before = private_counters()
    # Dropped: each round's outputs and snapshots die before the next round, which reuses them.
    for salt in range(3, 9):
        issued, expected = issue(rank, world_size, salt)
        for op, out in issued.items():
            checks.expect(f"{op} #{salt}", ops.wait_tensor(out), expected[op], exact=op in MOVES)
        del issued, out
    # Gloo's worker lets go of a collective's tensors just after completing it: give the last
    # round's blocks a moment to come back.
    deadline = time.monotonic() + 5
    after = private_counters()
    while after["private_in_use_bytes"] > before["private_in_use_bytes"]:
        if time.monotonic() > deadline:
            checks.failures.append(f"rank {rank}: blocks in use grew: {before} -> {after}")
            break
        time.sleep(0.01)
        after = private_counters()
    if cached:
        # 6 rounds of 5 outputs and the snapshots of the ops that read their input later: all
        # but the first round can be served by blocks the one before gave back.
        if after["private_reuses"] - before["private_reuses"] < 2 * 5:
            checks.failures.append(f"rank {rank}: blocks not reused: {before} -> {after}")
    elif after["private_allocations"] != 0 or after["private_cached_bytes"] != 0:
        checks.failures.append(f"rank {rank}: the cache is off but served blocks: {after}")
    # An output outlives its communicator.
    issued, expected = issue(rank, world_size, 10)
    kept = ops.wait_tensor(issued["all_to_all"])
    del issued
    c10d_func.shutdown()
    checks.expect("an all_to_all output after shutdown()", kept, expected["all_to_all"], exact=True)
    return checks.failures


@pytest.mark.parametrize("pool_name", ["pool2", "pool4"], ids=["ws2", "ws4"])
def test_gloo_outputs_and_snapshots_reuse_private_blocks(pool_name, request):
    pool = request.getfixturevalue(pool_name)
    assert_no_failures(pool.run(body_reuse, True, timeout=180))


def test_the_cache_turned_off_changes_no_result():
    pool = WorkerPool(2, env={"C10D_FUNC_HOST_CACHE_BYTES": "0"})
    try:
        assert_no_failures(pool.run(body_reuse, False, timeout=180))
    finally:
        pool.close()


def body_bad_bound(rank: int, world_size: int) -> str:
    c10d_func.set_transport("gloo", "cpu", tag=TAG)
    everyone = list(range(world_size))
    try:
        ops.wait_tensor(ops.all_reduce(torch.ones(N), "sum", TAG, everyone, world_size))
    except RuntimeError as error:
        return str(error)
    return "no error"


def test_a_bad_bound_is_named():
    value = "lots"
    pool = WorkerPool(2, env={"C10D_FUNC_HOST_CACHE_BYTES": value})
    try:
        for message in pool.run(body_bad_bound, timeout=120):
            assert "C10D_FUNC_HOST_CACHE_BYTES must be a number of bytes" in message, message
            assert value in message, message
    finally:
        pool.close()
