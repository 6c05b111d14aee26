"""Large messages (over the 256 KiB the shm transport runs through its slots), where shm takes the
direct path on symmetric host memory: every op, every dtype, on private inputs, on tensors from
`c10d_func.empty` (read in place) and on the outputs of earlier collectives (in the pool), at 2
and 4 ranks, on both CPU transports (on Gloo the same calls take its own path: a reference
point). Then what only shm has: output lifetimes (kept, dropped, kept across shutdown(), sent on
another tag), an exhausted pool falling back to ordinary memory, symmetric memory turned off,
the pool's counters in groups(), and the classic torch.distributed calls on private buffers,
reached with cross-memory attach where the kernel allows it and copied into the pool where a
seccomp filter refuses it."""

from __future__ import annotations

import ctypes
import os
import platform
import struct

import c10d_func
import pytest
import torch
import torch.distributed as dist
from reference import (
    MOVE_DTYPES,
    REDUCE_DTYPES,
    REDUCE_OPS,
    make_input,
    reduce_allowed,
    reduce_reference,
)
from test_collectives import Checks, assert_no_failures, chunk_of
from worker_pool import WorkerPool

ops = torch.ops.c10d_func

SOURCES = ["private", "symmetric", "output"]
LARGE_BYTES = 320 << 10  # over the shm transport's inline/slot limit (256 KiB)
LAYOUTS = {2: [([0, 1], 2), ([1, 0], 2)], 4: [([0, 1, 2, 3], 4), ([3, 1, 2, 0], 2)]}


def large_rows(dtype: torch.dtype, per_row: int = 1) -> int:
    # An odd count, so members' slices of a reduction differ in length.
    return LARGE_BYTES // (torch.empty((), dtype=dtype).element_size() * per_row) + 5


def as_source(x: torch.Tensor, source: str, ranks: list[int], gs: int) -> torch.Tensor:
    """`x`'s values in the kind of memory `source` names (see the module docstring)."""
    if source == "private":
        return x
    if source == "symmetric":
        t = c10d_func.empty(
            x.shape, dtype=x.dtype, group=[ranks[i : i + gs] for i in range(0, len(ranks), gs)]
        )
        return t.copy_(x)
    identity = list(range(gs))  # a permute onto itself: the same values, in a collective's output
    return ops.wait_tensor(ops.permute(x, identity, "", ranks, gs))


def body_reductions(rank: int, world_size: int, source: str) -> list[str]:
    checks = Checks(rank)
    for ranks, gs in LAYOUTS[world_size]:
        members, me = chunk_of(rank, ranks, gs)
        for d, dtype in enumerate(REDUCE_DTYPES + [torch.int16]):
            for op in [o for o in REDUCE_OPS if reduce_allowed(o, dtype)]:
                salt = 10 * d + REDUCE_OPS.index(op)  # the same on every rank
                shape = (large_rows(dtype),)
                inputs = [make_input(m, shape, dtype, salt) for m in members]
                expected = reduce_reference(inputs, op)
                what = f"{source} {op} {dtype} ranks={ranks} gs={gs}"
                x = as_source(inputs[me], source, ranks, gs)
                out = checks.functional(f"all_reduce {what}", ops.all_reduce, x, op, "", ranks, gs)
                checks.expect(f"all_reduce {what}", out, expected)
                y = as_source(inputs[me].clone(), source, ranks, gs)
                ops.all_reduce_(y, op, "", ranks, gs)
                ops.wait_tensor(y)
                checks.expect(f"all_reduce_ {what}", y, expected)
                reduced = ops.wait_tensor(ops.reduce(x, op, 0, "", ranks, gs))
                checks.expect(
                    f"reduce {what}", reduced, expected if me == 0 else torch.zeros_like(expected)
                )
                # reduce_scatter: each member's share is large too
                rows = large_rows(dtype, 3)
                full_inputs = [make_input(m, (gs * rows, 3), dtype, salt) for m in members]
                full = reduce_reference(full_inputs, op)
                xs = as_source(full_inputs[me], source, ranks, gs)
                out = checks.functional(
                    f"reduce_scatter {what}", ops.reduce_scatter_tensor, xs, op, "", ranks, gs
                )
                checks.expect(f"reduce_scatter {what}", out, full[me * rows : (me + 1) * rows])
    return checks.failures


def body_movement(rank: int, world_size: int, source: str) -> list[str]:
    checks = Checks(rank)
    for ranks, gs in LAYOUTS[world_size]:
        members, me = chunk_of(rank, ranks, gs)
        for d, dtype in enumerate(MOVE_DTYPES):
            salt = 10 * d  # the same on every rank
            what = f"{source} {dtype} ranks={ranks} gs={gs}"
            shape = (large_rows(dtype),)
            inputs = [make_input(m, shape, dtype, salt) for m in members]
            x = as_source(inputs[me], source, ranks, gs)
            out = checks.functional(
                f"all_gather {what}", ops.all_gather_into_tensor, x, "", ranks, gs
            )
            checks.expect(f"all_gather {what}", out, torch.cat(inputs), exact=True)
            for root in (0, gs - 1):
                out = checks.functional(f"broadcast {what}", ops.broadcast, x, root, "", ranks, gs)
                checks.expect(f"broadcast root={root} {what}", out, inputs[root], exact=True)
                y = as_source(inputs[me].clone(), source, ranks, gs)
                ops.broadcast_(y, root, "", ranks, gs)
                ops.wait_tensor(y)
                checks.expect(f"broadcast_ root={root} {what}", y, inputs[root], exact=True)
                out = checks.functional(f"gather {what}", ops.gather, x, root, "", ranks, gs)
                checks.expect(
                    f"gather root={root} {what}",
                    out,
                    torch.cat(inputs) if me == root else torch.zeros_like(torch.cat(inputs)),
                    exact=True,
                )
                pieces = [make_input(m, (gs * shape[0],), dtype, salt + 1) for m in members]
                xs = as_source(pieces[me], source, ranks, gs)
                out = checks.functional(f"scatter {what}", ops.scatter, xs, root, "", ranks, gs)
                checks.expect(
                    f"scatter root={root} {what}",
                    out,
                    pieces[root][me * shape[0] : (me + 1) * shape[0]],
                    exact=True,
                )
            # all_to_all with uneven splits: member m sends (m + 1) * (d + 1) rows to member d
            rows = large_rows(dtype) // gs

            def split(sender: int, receiver: int) -> int:
                return rows + 7 * sender + 3 * receiver

            sent = [
                make_input(members[i], (sum(split(i, d) for d in range(gs)),), dtype, salt + 2)
                for i in range(gs)
            ]
            xs = as_source(sent[me], source, ranks, gs)
            out = checks.functional(
                f"all_to_all {what}",
                ops.all_to_all_single,
                xs,
                [split(m, me) for m in range(gs)],
                [split(me, d) for d in range(gs)],
                "",
                ranks,
                gs,
            )
            expected = torch.cat(
                [sent[m][sum(split(m, d) for d in range(me)) :][: split(m, me)] for m in range(gs)]
            )
            checks.expect(f"all_to_all {what}", out, expected, exact=True)
            shift = [(i + 1) % gs for i in range(gs)]
            out = checks.functional(f"permute {what}", ops.permute, x, shift, "", ranks, gs)
            checks.expect(f"permute {what}", out, inputs[(me - 1) % gs], exact=True)
    return checks.failures


def body_half_sums(rank: int, world_size: int) -> list[str]:
    checks = Checks(rank)
    everyone = list(range(world_size))
    for dtype in (torch.bfloat16, torch.float16):
        big = 256.0 if dtype == torch.bfloat16 else 2048.0  # where the spacing of the dtype is 2
        for n in (1000, large_rows(dtype)):  # through the slots and the direct path
            x = torch.full((n,), big if rank == 0 else 1.0, dtype=dtype)
            expected = torch.full((n,), big + world_size - 1, dtype=torch.float64).to(dtype)
            out = ops.wait_tensor(ops.all_reduce(x, "sum", "", everyone, world_size))
            checks.expect(f"{dtype} sum of {big} and ones, {n} elements", out, expected, exact=True)
    return checks.failures


def test_half_precision_sums_accumulate_in_fp32(pool4):
    # 4 ranks: 256 + 1 + 1 + 1 is 259 (260 in bf16); rounding after each addition gives 256.
    assert_no_failures(pool4.run(body_half_sums))


@pytest.mark.parametrize("source", SOURCES)
def test_reductions_on_large_messages(pool, source):
    assert_no_failures(pool.run(body_reductions, source, timeout=300))


@pytest.mark.parametrize("source", SOURCES)
def test_movement_on_large_messages(pool, source):
    assert_no_failures(pool.run(body_movement, source, timeout=300))


# ---------------------------------------------------------------- what only shm has

N = 1 << 20  # 4 MiB of float32


def memory_of(tag: str) -> dict[str, int]:
    (group,) = [g for g in c10d_func.groups() if g["tag"] == tag and g["device"] == "cpu"]
    assert group["backend"] == "shm", group
    return group["memory"]


def body_lifetimes(rank: int, world_size: int) -> list[str]:
    checks = Checks(rank)
    everyone = list(range(world_size))
    ref = lambda salt: reduce_reference(
        [make_input(m, (N,), torch.float32, salt) for m in everyone], "sum"
    )
    # Kept: many outputs alive at once, issued before any is waited; later ones never reuse the
    # blocks of earlier ones.
    kept = [
        ops.all_reduce(
            make_input(rank, (N,), torch.float32, i), "sum", "life", everyone, world_size
        )
        for i in range(6)
    ]
    for i, out in enumerate(kept):
        checks.expect(f"kept output {i}", ops.wait_tensor(out), ref(i))
    del kept, out
    # Dropped: each output dies before the next call, whose output reuses its block.
    before = memory_of("life")
    for i in range(8):
        out = ops.wait_tensor(
            ops.all_reduce(
                make_input(rank, (N,), torch.float32, i), "sum", "life", everyone, world_size
            )
        )
        checks.expect(f"dropped output {i}", out, ref(i))
        del out
    after = memory_of("life")
    if after["reuses"] - before["reuses"] < 8:
        checks.failures.append(
            f"rank {rank}: dropped outputs' blocks were not reused: {before} -> {after}"
        )
    if after["reserved_bytes"] > before["reserved_bytes"]:
        checks.failures.append(
            f"rank {rank}: the pool grew while outputs were dropped: {before} -> {after}"
        )
    if after["in_use_bytes"] != 0:
        checks.failures.append(f"rank {rank}: blocks still in use with no tensor alive: {after}")
    # Sent on another tag: an output of tag "life" is a private input for tag "other".
    out = ops.wait_tensor(
        ops.all_reduce(
            make_input(rank, (N,), torch.float32, 1), "sum", "life", everyone, world_size
        )
    )
    again = ops.wait_tensor(ops.all_reduce(out, "sum", "other", everyone, world_size))
    checks.expect("output sent on another tag", again, ref(1) * world_size)
    # Kept across shutdown(): the block keeps the segment mapped after its communicator is gone.
    ops.wait_tensor(ops.all_reduce(torch.ones(1), "sum", "", everyone, world_size))  # all arrive
    c10d_func.shutdown()
    checks.expect("output kept across shutdown()", out, ref(1))
    fresh = ops.wait_tensor(ops.all_reduce(out, "sum", "life", everyone, world_size))
    checks.expect("collective after shutdown()", fresh, ref(1) * world_size)
    checks.expect("output kept across shutdown(), after new collectives", out, ref(1))
    del out, again, fresh
    return checks.failures


def test_output_lifetimes(pool2):
    assert_no_failures(pool2.run(body_lifetimes))


def body_pool_exhausted(rank: int, world_size: int, bound: int) -> list[str]:
    checks = Checks(rank)
    everyone = list(range(world_size))
    ref = lambda salt, n: reduce_reference(
        [make_input(m, (n,), torch.float32, salt) for m in everyone], "sum"
    )
    for n in (N // 8, N, 4 * N):  # 512 KiB to 16 MiB against a pool of `bound` bytes
        outs = [
            ops.all_reduce(
                make_input(rank, (n,), torch.float32, i), "sum", "small", everyone, world_size
            )
            for i in range(3)
        ]
        gathered = ops.all_gather_into_tensor(
            make_input(rank, (n,), torch.float32, 9), "small", everyone, world_size
        )
        for i, out in enumerate(outs):
            checks.expect(
                f"all_reduce {n} #{i} over a pool of {bound} B", ops.wait_tensor(out), ref(i, n)
            )
        checks.expect(
            f"all_gather {n} over a pool of {bound} B",
            ops.wait_tensor(gathered),
            torch.cat([make_input(m, (n,), torch.float32, 9) for m in everyone]),
            exact=True,
        )
    symmetric = c10d_func.empty(4 * N, group=everyone, tag="small").fill_(rank + 1)
    reduced = ops.wait_tensor(ops.all_reduce(symmetric, "sum", "small", everyone, world_size))
    checks.expect(
        "an empty() tensor beyond the pool",
        reduced,
        torch.full((4 * N,), float(sum(range(1, world_size + 1)))),
    )
    memory = memory_of("small")
    if (
        memory["region_bytes"] != bound
        or memory["fallbacks"] == 0
        or memory["reserved_bytes"] > bound
    ):
        checks.failures.append(
            f"rank {rank}: pool of {bound} B: expected fallbacks within the bound, got {memory}"
        )
    if memory["private_allocations"] == 0:  # the large ones the pool could not hold
        checks.failures.append(f"rank {rank}: no fallback went to the private cache: {memory}")
    return checks.failures


@pytest.mark.parametrize("bound", [1 << 20, 0], ids=["1MiB", "off"])
def test_an_exhausted_pool_falls_back_to_ordinary_memory(bound):
    pool = WorkerPool(2, env={"C10D_FUNC_SHM_POOL_BYTES": str(bound)})
    try:
        assert_no_failures(pool.run(body_pool_exhausted, bound, timeout=180))
    finally:
        pool.close()


def body_counters(rank: int, world_size: int) -> dict:
    everyone = list(range(world_size))
    t = c10d_func.empty(N, group=everyone, tag="counted")
    out = ops.wait_tensor(ops.all_gather_into_tensor(t.fill_(1.0), "counted", everyone, world_size))
    return {"memory": memory_of("counted"), "ok": bool(out.eq(1.0).all()), "size": out.numel()}


def test_groups_reports_the_pool(pool2):
    for answer in pool2.run(body_counters):
        memory = answer["memory"]
        assert answer["ok"] and answer["size"] == 2 * N, answer
        assert set(memory) == {
            "region_bytes",
            "reserved_bytes",
            "in_use_bytes",
            "allocations",
            "reuses",
            "fallbacks",
            "cross_memory_attach",
            # the process's cache of private host memory, where fallbacks go
            "private_cached_bytes",
            "private_in_use_bytes",
            "private_allocations",
            "private_reuses",
        }
        # the empty() tensor, the gathered output (its snapshot of t is not needed: t is symmetric)
        assert memory["allocations"] >= 2 and memory["fallbacks"] == 0, memory
        assert memory["in_use_bytes"] >= 3 * N * 4, memory


# ---------------------------------------------------------------- classic calls, cross-memory attach

# process_vm_readv / process_vm_writev
CMA_SYSCALLS = {"x86_64": (310, 311), "aarch64": (270, 271)}


def deny_cross_memory_attach() -> None:
    """Installs a seccomp filter on this process: process_vm_readv/writev fail with EPERM, as a
    container policy would make them (the kernel refuses; nothing in the library is told)."""
    read, write = CMA_SYSCALLS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    load_nr, jump_eq, ret = 0x20, 0x15, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    program = b"".join(
        [
            struct.pack("HBBI", load_nr, 0, 0, 0),  # seccomp_data.nr
            struct.pack("HBBI", jump_eq, 0, 1, read),
            struct.pack("HBBI", ret, 0, 0, eperm),
            struct.pack("HBBI", jump_eq, 0, 1, write),
            struct.pack("HBBI", ret, 0, 0, eperm),
            struct.pack("HBBI", ret, 0, 0, allow),
        ]
    )
    code = ctypes.create_string_buffer(program)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Program(len(program) // 8, ctypes.addressof(code))
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0, (
        ctypes.get_errno()
    )  # SECCOMP_MODE_FILTER


def setup_classic_world(rank: int, world_size: int) -> None:
    if os.environ.get("TEST_DENY_CMA_ON_RANK") == str(rank):
        deny_cross_memory_attach()
    dist.init_process_group("cpu:c10d_func", rank=rank, world_size=world_size)


def body_classic_calls(rank: int, world_size: int) -> dict:
    checks = Checks(rank)
    everyone = list(range(world_size))
    for d, dtype in enumerate([torch.float32, torch.bfloat16, torch.int64]):
        n = (16 << 20) // torch.empty(
            (), dtype=dtype
        ).element_size()  # 16 MiB: attached when allowed
        inputs = [make_input(m, (n,), dtype, d) for m in everyone]
        bucket = inputs[rank].clone()
        dist.all_reduce(bucket)  # in place: attached, or copied into the pool and back
        checks.expect(f"dist.all_reduce {dtype}", bucket, reduce_reference(inputs, "sum"))
        out = torch.empty(world_size * n, dtype=dtype)
        dist.all_gather_into_tensor(out, inputs[rank])
        checks.expect(f"dist.all_gather_into_tensor {dtype}", out, torch.cat(inputs), exact=True)
        out = torch.empty(n // world_size, dtype=dtype)
        dist.reduce_scatter_tensor(out, inputs[rank])
        share = n // world_size
        checks.expect(
            f"dist.reduce_scatter_tensor {dtype}",
            out,
            reduce_reference(inputs, "sum")[rank * share : (rank + 1) * share],
        )
        out = torch.empty(n, dtype=dtype)
        dist.all_to_all_single(out, inputs[rank])
        checks.expect(
            f"dist.all_to_all_single {dtype}",
            out,
            torch.cat([inputs[m][rank * share : (rank + 1) * share] for m in everyone]),
            exact=True,
        )
        root_buffer = inputs[rank].clone()
        dist.broadcast(root_buffer, src=world_size - 1)
        checks.expect(f"dist.broadcast {dtype}", root_buffer, inputs[world_size - 1], exact=True)
    (group,) = [g for g in c10d_func.groups() if g["device"] == "cpu" and g["backend"] == "shm"]
    return {
        "failures": checks.failures,
        "cross_memory_attach": group["memory"]["cross_memory_attach"],
    }


@pytest.mark.parametrize(
    "env, attached",
    [({}, 1), ({"TEST_DENY_CMA_ON_RANK": "1"}, 0), ({"C10D_FUNC_SHM_CMA": "0"}, 0)],
    ids=["attached", "refused-by-seccomp", "turned-off"],
)
def test_classic_calls_on_private_buffers(env, attached):
    pool = WorkerPool(
        2, env={"C10D_FUNC_TEST_SETUP": "test_symmetric_memory:setup_classic_world", **env}
    )
    try:
        answers = pool.run(body_classic_calls, timeout=180)
    finally:
        pool.close()
    assert_no_failures([a["failures"] for a in answers])
    assert [a["cross_memory_attach"] for a in answers] == [attached] * 2, answers


# ---------------------------------------------------------------- split sizes that disagree


def body_mismatched_splits(rank: int, world_size: int) -> str:
    # Rank 0 sends 3 rows to rank 1, which expects 2: each rank's own arguments are consistent,
    # so only the members together can see it.
    x = torch.arange(5 if rank == 0 else 4, dtype=torch.float32)
    send = [2, 3] if rank == 0 else [2, 2]
    try:
        ops.wait_tensor(ops.all_to_all_single(x, [2, 2], send, "mismatch", [0, 1], 2))
        return "no error"
    except RuntimeError as error:
        return str(error)


def test_all_to_all_split_sizes_that_disagree_fail_on_every_member(pool2):
    for message in pool2.run(body_mismatched_splits, timeout=60):
        assert (
            "split sizes disagree: rank 0 sends 12 bytes to rank 1, which expects 8" in message
        ), message


def body_uneven_splits_through_the_slots(rank: int, world_size: int) -> list[str]:
    # Parts of uneven sizes, some empty, from a few elements to several rounds of the slots
    # (4 MiB chunks), each member's own part included, against the reference.
    everyone = list(range(world_size))
    failures = []
    for rows in (1, 1000, 3 << 20):
        sends = [[(3 * i + 5 * j) % 4 * rows // 2 for j in everyone] for i in everyone]
        inputs = [make_input(i, (sum(sends[i]),), torch.float32, salt=rows) for i in everyone]
        got = ops.wait_tensor(
            ops.all_to_all_single(
                inputs[rank],
                [sends[j][rank] for j in everyone],
                sends[rank],
                "slots-uneven",
                everyone,
                world_size,
            )
        )
        expected = torch.cat([inputs[j].split(sends[j])[rank] for j in everyone])
        if not torch.equal(got, expected):
            failures.append(f"rank {rank}, {rows} rows: not the reference")
    return failures


def test_all_to_all_split_sizes_that_disagree_fail_through_the_slots_too():
    # Without symmetric memory the parts go through the slots, which carry no sizes: the members
    # show one another their sizes there first (before, rank 1 read 8 bytes of rank 0's 12 and
    # both returned, no error anywhere). Uneven sizes that pair up still arrive whole.
    pool = WorkerPool(2, env={"C10D_FUNC_SHM_POOL_BYTES": "0", "C10D_FUNC_TIMEOUT": "5"})
    try:
        assert_no_failures(pool.run(body_uneven_splits_through_the_slots, timeout=120))
        messages = pool.run(body_mismatched_splits, timeout=60)
    finally:
        pool.close()
    for message in messages:
        assert (
            "split sizes disagree: rank 0 sends 12 bytes to rank 1, which expects 8" in message
        ), message
