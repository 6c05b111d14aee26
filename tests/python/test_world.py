"""Where the world comes from (env://, the default process group, c10d_func.init), tags,
register_group, introspection, shutdown, and outputs dropped without a wait."""

from __future__ import annotations

import gc
import os
import time

import c10d_func
import pytest
import torch
import torch.distributed as dist
from test_backend import shm_mappings
from worker_pool import WorkerPool, free_port

ops = torch.ops.c10d_func


def summed(rank: int, world_size: int, tag: str = "") -> list[float]:
    x = torch.full((3,), float(rank + 1))
    return ops.wait_tensor(
        ops.all_reduce(x, "sum", tag, list(range(world_size)), world_size)
    ).tolist()


def expected_sum(world_size: int) -> list[float]:
    return [float(world_size * (world_size + 1) // 2)] * 3


def body_env_world(rank: int, world_size: int):
    out = summed(rank, world_size)
    return out, c10d_func.world(), dist.is_initialized()


def test_env_world_needs_no_init_process_group(pool):
    for rank, (out, world, initialised) in enumerate(pool.run(body_env_world)):
        assert out == expected_sum(pool.world_size)
        assert world == {
            "rank": rank,
            "world_size": pool.world_size,
            "origin": "env://",
            "delegated": False,
            "per_thread": False,
        }
        assert not initialised


def body_two_tags(rank: int, world_size: int):
    ranks = list(range(world_size))
    a = ops.all_reduce(torch.full((2,), 1.0 + rank), "sum", "tag-a", ranks, world_size)
    b = ops.all_reduce(torch.full((2,), 10.0 * (rank + 1)), "max", "tag-b", ranks, world_size)
    c = ops.all_reduce(torch.full((2,), 2.0), "product", "tag-a", ranks, world_size)
    results = [ops.wait_tensor(x).tolist() for x in (b, a, c)]
    tags = sorted(
        g["tag"] for g in c10d_func.groups() if g["ranks"] == ranks and g["tag"].startswith("tag-")
    )
    return results, tags


def test_two_tags_over_the_same_ranks_are_independent(pool):
    n = pool.world_size
    for results, tags in pool.run(body_two_tags):
        assert results == [[10.0 * n] * 2, [n * (n + 1) / 2] * 2, [2.0**n] * 2]
        assert tags == ["tag-a", "tag-b"]


def body_drop_without_wait(rank: int, world_size: int):
    ranks = list(range(world_size))
    before = c10d_func._C.pending_count()
    for i in range(300):
        ops.all_reduce(torch.full((64,), float(i)), "avg", "drop", ranks, world_size)  # dropped
    last = ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", "drop", ranks, world_size))
    gc.collect()
    deadline = time.monotonic() + 10
    while c10d_func._C.pending_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    return last.tolist(), c10d_func._C.pending_count() - before


def test_outputs_dropped_without_a_wait_do_not_leak(pool2):
    for last, left in pool2.run(body_drop_without_wait):
        assert last == [2.0, 2.0]
        assert left == 0


def body_shutdown_and_again(rank: int, world_size: int):
    first = summed(rank, world_size, "again")
    c10d_func.shutdown()
    after_shutdown = (c10d_func.groups(), c10d_func.world())
    second = summed(rank, world_size, "again")
    return first, after_shutdown, second


def test_shutdown_then_new_collectives(pool2):
    for rank, (first, (groups, world), second) in enumerate(pool2.run(body_shutdown_and_again)):
        assert first == second == expected_sum(2)
        assert groups == [] and world["rank"] == rank


def body_chunks_of_one_are_local(rank: int, world_size: int):
    # group_size 1 cuts the world into chunks of one member each: every op is a local copy, done
    # when it returns (nothing pending), on no transport.
    ranks = list(range(world_size))
    before = c10d_func._C.pending_count()
    x = torch.arange(6.0).reshape(3, 2) + rank
    outs = {
        "all_reduce": ops.all_reduce(x, "avg", "solo", ranks, 1),
        "all_gather": ops.all_gather_into_tensor(x, "solo", ranks, 1),
        "reduce_scatter": ops.reduce_scatter_tensor(x, "max", "solo", ranks, 1),
        "all_to_all": ops.all_to_all_single(x, [3], [3], "solo", ranks, 1),
        "broadcast": ops.broadcast(x, 0, "solo", ranks, 1),
        "gather": ops.gather(x, 0, "solo", ranks, 1),
        "scatter": ops.scatter(x, 0, "solo", ranks, 1),
        "permute": ops.permute(x, [0], "solo", ranks, 1),
    }
    pending = c10d_func._C.pending_count() - before
    x.add_(100)  # the outputs must not alias or lag behind the input
    values = {name: ops.wait_tensor(out).tolist() for name, out in outs.items()}
    backends = {
        (g["ranks"] == [rank], g["backend"]) for g in c10d_func.groups() if g["tag"] == "solo"
    }
    return pending, values, backends


def test_chunks_of_one_member_are_local_copies(pool):
    for rank, (pending, values, backends) in enumerate(pool.run(body_chunks_of_one_are_local)):
        expected = (torch.arange(6.0).reshape(3, 2) + rank).tolist()
        assert pending == 0
        assert all(v == expected for v in values.values()), values
        assert backends == {(True, "local")}


def body_binding_after_first_use(rank: int, world_size: int):
    # The first call resolves tag "late" to a communicator of c10d_func's own and caches it; a
    # ProcessGroup bound to the tag afterwards must win from the next call on.
    first = summed(rank, world_size, "late")
    pg = dist.new_group(list(range(world_size)), backend="gloo")
    c10d_func.register_group(pg, tag="late")
    second = summed(rank, world_size, "late")
    origins = sorted(
        g["origin"] for g in c10d_func.groups() if g["tag"] == "late" and g["device"] == "cpu"
    )
    return first, second, origins


# ------------------------------------------- worlds that need their own processes (fresh pools)


def setup_default_group(rank: int, world_size: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def setup_explicit_init(rank: int, world_size: int) -> None:
    store = dist.TCPStore(
        "127.0.0.1", int(os.environ["C10D_FUNC_TEST_PORT"]), world_size, rank == 0
    )
    c10d_func.init(store, rank, world_size)


def body_default_group(rank: int, world_size: int):
    out = summed(rank, world_size)
    # A subgroup bound to a tag resolves to that very ProcessGroup.
    pg = dist.new_group([0, 1], backend="gloo")
    c10d_func.register_group(pg, tag="bound")
    bound = None
    if rank in (0, 1):
        x = torch.full((2,), float(rank + 5))
        bound = ops.wait_tensor(ops.all_reduce(x, "sum", "bound", [0, 1], 2)).tolist()
    registered = [g for g in c10d_func.groups() if g["tag"] == "bound"]
    return out, c10d_func.world()["origin"], bound, registered


@pytest.mark.parametrize("world_size", [2, 4])
def test_world_from_the_default_process_group_and_register_group(world_size):
    pool = WorkerPool(world_size, env={"C10D_FUNC_TEST_SETUP": "test_world:setup_default_group"})
    try:
        for rank, (out, origin, bound, registered) in enumerate(pool.run(body_default_group)):
            assert out == expected_sum(world_size)
            assert origin == "default process group"
            if rank in (0, 1):
                assert bound == [11.0, 11.0]
                assert registered and registered[0]["origin"] == "registered"
                assert registered[0]["ranks"] == [0, 1] and registered[0]["backend"] == "gloo"
    finally:
        pool.close()


def body_destroyed_bound_groups(rank: int, world_size: int) -> dict:
    import weakref

    out: dict = {"before": (len(c10d_func.groups()), shm_mappings())}
    alive, sums, received = [], [], []
    for round_ in range(3):
        pg = dist.new_group(list(range(world_size)), backend="gloo")
        x = torch.full((3,), float(rank + 1))
        sums.append(c10d_func.all_reduce(x, "sum", pg).wait().tolist())  # bound on first use
        c10d_func.register_group(pg, tag="kept")  # and bound by the program
        sums.append(summed(rank, world_size, "kept"))
        # A message between the first two members: a channel of the group's tag (shm here).
        if rank == 0:
            c10d_func.isend(torch.full((3,), float(round_)), 1, pg).wait()
        elif rank == 1:
            received.append(c10d_func.irecv(torch.empty(3), 0, pg).wait().tolist())
        alive.append(weakref.ref(pg))
        dist.destroy_process_group(pg)
        del pg
    gc.collect()
    out["left"] = (len(c10d_func.groups()), shm_mappings())
    out["alive"] = sum(ref() is not None for ref in alive)
    out["sums"], out["received"] = sums, received
    # The tag still names a group: c10d_func's own communicator, formed on the next call.
    out["after"] = summed(rank, world_size, "kept")
    out["origins"] = sorted(g["origin"] for g in c10d_func.groups() if g["tag"] == "kept")
    return out


def test_a_group_bound_after_first_use_wins():
    pool = WorkerPool(2, env={"C10D_FUNC_TEST_SETUP": "test_world:setup_default_group"})
    try:
        for first, second, origins in pool.run(body_binding_after_first_use):
            assert first == second == expected_sum(2)
            assert origins == ["registered"]
        # torch destroying a bound group lets go of it: neither the registry nor c10d_func's
        # Python side keeps it (or its backends' sockets and threads) alive, nor the message
        # channels of its tag.
        for rank, out in enumerate(pool.run(body_destroyed_bound_groups)):
            assert all(v == expected_sum(2) for v in out["sums"]), out
            assert out["received"] == ([[float(r)] * 3 for r in range(3)] if rank == 1 else [])
            # Communicators, message channels and their shared memory: as before the groups.
            assert out["left"] == out["before"], out
            assert out["alive"] == 0
            assert out["after"] == expected_sum(2)
            assert out["origins"] == ["created"]
    finally:
        pool.close()


def body_explicit(rank: int, world_size: int):
    return summed(rank, world_size), c10d_func.world()


def test_world_from_an_explicit_init():
    pool = WorkerPool(
        2,
        env={
            "C10D_FUNC_TEST_SETUP": "test_world:setup_explicit_init",
            "C10D_FUNC_TEST_PORT": str(free_port()),
            # No env:// world: only the explicit store can work.
            "MASTER_ADDR": "",
            "MASTER_PORT": "",
        },
    )
    try:
        for rank, (out, world) in enumerate(pool.run(body_explicit)):
            assert out == expected_sum(2)
            assert world == {
                "rank": rank,
                "world_size": 2,
                "origin": "init",
                "delegated": False,
                "per_thread": False,
            }
    finally:
        pool.close()
