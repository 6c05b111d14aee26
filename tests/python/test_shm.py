"""The shm transport: what the op suite (run on both CPU transports) does not show. A member
killed during a large collective fails the others within the timeout, naming its rank; no
segment is left in /dev/shm by a kill or a normal exit; two jobs on one host do not interfere;
members in different collectives fail instead of mixing data; a bad value a peer writes into the
segment (its header, a placement, a split, a round count) fails every member, naming the writer.
Chunks spanning real hosts: test_hosts.py."""

from __future__ import annotations

import os
import sys

import c10d_func
import pytest
import torch
from test_collectives import assert_no_failures
from worker_pool import WorkerPool, launch_ranks
from worker_pool import finish_ranks as finish

ops = torch.ops.c10d_func
HERE = os.path.dirname(os.path.abspath(__file__))


def launch(program: str, world_size: int, *args: str, env: dict[str, str] | None = None):
    return launch_ranks(
        [sys.executable, os.path.join(HERE, "programs", program), *args], world_size, env
    )


def segments_of(pids) -> list[str]:
    """The /dev/shm entries this library names after a process (rank 0 creates them)."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return [
        n for n in names if n.startswith("c10d_func_") and any(n.endswith(f"_{p}") for p in pids)
    ]


def test_a_member_killed_mid_collective_fails_the_others_naming_it(tmp_path):
    # A long timeout: the failure must come from seeing rank 1 dead, which the error says, not
    # from the clock.
    procs = launch(
        "shm_member_killed.py", 2, str(tmp_path / "issued"), env={"C10D_FUNC_TIMEOUT": "300"}
    )
    pids = [p.pid for p in procs]
    (code0, out0, err0), (code1, _, _) = finish(procs)
    assert code1 == -9, "rank 1 was to be killed"
    assert code0 == 0, err0[-2000:]
    line = next(l for l in out0.splitlines() if l.startswith("RESULT "))
    assert "no error" not in line, line
    assert "rank 1" in line and "c10d_func.all_reduce" in line, line
    assert "exited" in line and "C10D_FUNC_TIMEOUT" not in line, line
    assert segments_of(pids) == []


def test_two_jobs_on_one_host_do_not_interfere():
    jobs = [launch("shm_job.py", 2, str(job)) for job in (1, 2)]
    pids = [p.pid for procs in jobs for p in procs]
    for job, procs in enumerate(jobs, start=1):
        for rank, (code, out, err) in enumerate(finish(procs)):
            assert code == 0 and "job ok" in out, f"job {job} rank {rank}: {out}{err[-2000:]}"
    assert segments_of(pids) == []


def body_different_collectives(rank: int, world_size: int, tag: str):
    ranks = list(range(world_size))
    try:
        if rank == 0:
            ops.wait_tensor(ops.all_gather_into_tensor(torch.ones(3), tag, ranks, world_size))
        else:
            ops.wait_tensor(ops.all_reduce(torch.ones(3), "sum", tag, ranks, world_size))
        return "no error"
    except RuntimeError as error:
        return str(error)


def test_members_in_different_collectives_fail_instead_of_mixing_data():
    pool = WorkerPool(2, env={"C10D_FUNC_TIMEOUT": "20"})
    try:
        messages = pool.run(body_different_collectives, "mixed", timeout=90)
    finally:
        pool.close()
    for message in messages:
        assert "the members are in different collectives" in message, message


def body_different_reductions(rank: int, world_size: int, op: str, numel: int) -> str:
    """Every member calls the same reduction of the same shape, but rank 0 asks for another
    reduce op: that must fail, not return a tensor reduced half one way, half the other."""
    ranks = list(range(world_size))
    asked = ("sum", "max") if op == "all_reduce" else ("sum", "avg")
    x = torch.ones(numel) * (rank + 1)
    try:
        if op == "all_reduce":
            out = ops.all_reduce(x, asked[rank != 0], f"mixed-{op}-{numel}", ranks, world_size)
        else:
            out = ops.reduce_scatter_tensor(
                x, asked[rank != 0], f"mixed-{op}-{numel}", ranks, world_size
            )
        ops.wait_tensor(out)
        return "no error"
    except RuntimeError as error:
        return str(error)


@pytest.mark.parametrize("numel", [16, 1 << 18], ids=["small", "1MiB"])
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_members_asking_for_different_reductions_fail(pool2, op, numel):
    for message in pool2.run(body_different_reductions, op, numel, timeout=120):
        assert "the members are in different collectives" in message, message
        assert "reduction" in message, message


SMALL_CHUNKS = {
    "C10D_FUNC_SHM_CHUNK_BYTES": "131072"
}  # 128 KiB slots: many chunks, sliced reductions


def member_input(member: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    values = (torch.arange(n, dtype=torch.int64) * (member + 3) + member) % 97
    return values.to(dtype)


def body_large_messages(rank: int, world_size: int) -> list[str]:
    """Every op on messages spanning many slots (the sliced reduction included), checked against
    references computed from every member's known input."""
    ranks = list(range(world_size))
    n = world_size * 40000 + 8  # not a multiple of a slot, of the members or of a slice
    rows = n // world_size
    failures = []

    def check(what, got, want):
        if not torch.equal(got, want):
            bad = (got != want).nonzero()[:3].flatten()
            failures.append(
                f"{what}: mismatch at {bad.tolist()}: {got[bad].tolist()} vs {want[bad].tolist()}"
            )

    for dtype in (
        torch.float32,
        torch.float64,
        torch.bfloat16,
        torch.int32,
        torch.int16,
        torch.uint8,
    ):
        xs = [member_input(m, n, dtype) for m in ranks]
        wide = [x.to(torch.float64) for x in xs]
        for op in ("sum", "max", "min"):
            want = {
                "sum": sum(wide),
                "max": torch.stack(wide).amax(0),
                "min": torch.stack(wide).amin(0),
            }[op]
            got = ops.wait_tensor(ops.all_reduce(xs[rank], op, "big", ranks, world_size))
            check(
                f"all_reduce {op} {dtype}", got.to(torch.float64), want.to(dtype).to(torch.float64)
            )
        scattered = ops.wait_tensor(
            ops.reduce_scatter_tensor(
                xs[rank][: rows * world_size], "sum", "big", ranks, world_size
            )
        )
        want = sum(w[: rows * world_size] for w in wide).to(dtype).chunk(world_size)[rank]
        check(f"reduce_scatter {dtype}", scattered, want)
    # In place on a private buffer: each member reduces its slice straight into its own buffer
    # and the others' slices come from the staged copy the peers wrote (avg divides per piece).
    for dtype, op in [
        (torch.float32, "sum"),
        (torch.float64, "avg"),
        (torch.bfloat16, "max"),
        (torch.int64, "sum"),
        (torch.complex64, "sum"),
    ]:
        inplace = member_input(rank, n, dtype)
        ops.all_reduce_(inplace, op, "big", ranks, world_size)
        every = torch.stack([member_input(m, n, dtype) for m in ranks])
        want = every.amax(0) if op == "max" else every.sum(0) / (world_size if op == "avg" else 1)
        check(f"all_reduce_ in place {op} {dtype}", ops.wait_tensor(inplace), want.to(dtype))
    x = member_input(rank, n, torch.float32)
    check(
        "all_gather",
        ops.wait_tensor(ops.all_gather_into_tensor(x, "big", ranks, world_size)),
        torch.cat([member_input(m, n, torch.float32) for m in ranks]),
    )
    check(
        "broadcast",
        ops.wait_tensor(ops.broadcast(x, world_size - 1, "big", ranks, world_size)),
        member_input(world_size - 1, n, torch.float32),
    )
    gathered = ops.wait_tensor(ops.gather(x, 0, "big", ranks, world_size))
    if rank == 0:
        check("gather", gathered, torch.cat([member_input(m, n, torch.float32) for m in ranks]))
    source = member_input(1, n * world_size, torch.float32)
    check(
        "scatter",
        ops.wait_tensor(
            ops.scatter(
                source if rank == 1 else torch.zeros_like(source), 1, "big", ranks, world_size
            )
        ),
        source.chunk(world_size)[rank],
    )

    # Uneven all_to_all: member s sends (s + d + 1) * 1500 rows of 2 to member d.
    def sent(s, d):
        return (s + d + 1) * 1500

    def block(s, d):
        start = sum(sent(s, k) for k in range(d))
        return member_input(s, 2 * sum(sent(s, k) for k in ranks), torch.float32).view(-1, 2)[
            start : start + sent(s, d)
        ]

    mine = member_input(rank, 2 * sum(sent(rank, k) for k in ranks), torch.float32).view(-1, 2)
    got = ops.wait_tensor(
        ops.all_to_all_single(
            mine,
            [sent(s, rank) for s in ranks],
            [sent(rank, d) for d in ranks],
            "big",
            ranks,
            world_size,
        )
    )
    check("all_to_all uneven", got, torch.cat([block(s, rank) for s in ranks]))
    backends = {g["backend"] for g in c10d_func.groups() if g["tag"] == "big"}
    if backends != {"shm"}:
        failures.append(f"ran on {backends}")
    return failures


@pytest.mark.parametrize("world_size", [2, 4])
def test_large_messages_stream_through_many_chunks(world_size):
    from conftest import get_pool

    results = get_pool(world_size, SMALL_CHUNKS).run(body_large_messages, timeout=170)
    failures = [f"rank {r}: {f}" for r, fs in enumerate(results) for f in fs]
    assert not failures, "\n".join(failures[:20])


def body_private_inputs_written_at_once(rank: int, world_size: int, numel: int) -> list[str]:
    """Large collectives of private inputs that the caller overwrites as soon as each call
    returns, with the members arriving together (all_to_all and a broadcast root may then do the
    part that reads the input inside the call, all_reduce all of it) and one after the other (the first one's call is
    queued and must have kept a copy): results against references from every member's input."""
    ranks = list(range(world_size))
    n = world_size
    order_tag = "private-order"
    rows = n * (numel // n)

    def meet() -> None:  # a collective on another tag: orders the members' calls, no sleeping
        ops.wait_tensor(ops.all_reduce(torch.ones(1), "sum", order_tag, ranks, n))

    # Each call's inputs: every member's own pattern shifted by the call's seed (built once:
    # making the patterns took most of the test's time), so no result of an earlier call matches.
    patterns = [member_input(m * 7, rows, torch.float32) for m in ranks]

    def inputs(seed: int) -> list[torch.Tensor]:
        return [pattern + seed for pattern in patterns]

    calls = {
        "all_to_all": (
            lambda x: ops.all_to_all_single(x, None, None, "private", ranks, n),
            lambda xs: torch.cat([x.chunk(n)[rank] for x in xs]),
        ),
        "permute": (
            lambda x: ops.permute(x, [(i + 1) % n for i in ranks], "private", ranks, n),
            lambda xs: xs[(rank - 1) % n],
        ),
        "broadcast from 0": (
            lambda x: ops.broadcast(x, 0, "private", ranks, n),
            lambda xs: xs[0],
        ),
        "broadcast from last": (
            lambda x: ops.broadcast(x, n - 1, "private", ranks, n),
            lambda xs: xs[n - 1],
        ),
        "all_gather": (
            lambda x: ops.all_gather_into_tensor(x, "private", ranks, n),
            torch.cat,
        ),
        "all_reduce": (lambda x: ops.all_reduce(x, "sum", "private", ranks, n), sum),
        "reduce_scatter": (
            lambda x: ops.reduce_scatter_tensor(x, "sum", "private", ranks, n),
            lambda xs: sum(xs).chunk(n)[rank],
        ),
    }
    failures = []
    seed = 0
    for first in [None, *ranks]:  # None: together; else that member calls before the others
        for name, (call, expected) in calls.items():
            seed += 1
            xs = inputs(seed)
            x = xs[rank].clone()
            if first is not None and rank != first:
                meet()  # after `first` has returned from its call
            out = call(x)
            x.fill_(-1.0e6)  # the caller owns its input again
            if first is not None and rank == first:
                meet()
            got = ops.wait_tensor(out)
            if not torch.equal(got, expected(xs)):
                when = "together" if first is None else f"rank {first} first"
                failures.append(f"rank {rank}: {name}, {when}: wrong result")
    return failures


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("numel", [1 << 20, 5 << 20])
def test_private_inputs_overwritten_after_the_call_together_or_apart(world_size, numel):
    from conftest import get_pool

    results = get_pool(world_size).run(body_private_inputs_written_at_once, numel, timeout=170)
    failures = [f for fs in results for f in fs]
    assert not failures, "\n".join(failures[:20])


FORMATION_FAULTS = ("header", "pid")  # written while a communicator forms


def corrupted_call(kind: str, tag: str, ranks: list[int], n: int) -> None:
    """The collective in which member 1 (rank 0 for "header") writes a bad value where the
    others read it (c10d_func._C.set_shm_fault_for_test, a test-only fault injection)."""
    if kind in FORMATION_FAULTS:  # forming a new communicator: rank 0 writes an impossible
        # region size ("header"), rank 1 pid -1 (Yama's "any process") as its own ("pid")
        ops.wait_tensor(ops.all_reduce(torch.ones(4), "sum", tag, ranks, n))
    elif kind == "placement":  # 8 MiB on symmetric memory: an input "at" the segment's header
        ops.wait_tensor(ops.all_reduce(torch.ones(2 << 20), "sum", tag, ranks, n))
    else:  # "split" (a negative length in all_to_all's directory) or "rounds"/"many_rounds"
        # (through the slots)
        numel = n * (1 << 16)
        ops.wait_tensor(ops.all_to_all_single(torch.ones(numel), None, None, tag, ranks, n))


def body_corrupted_peer(rank: int, world_size: int, kind: str, tag: str) -> str:
    ranks = list(range(world_size))
    if kind not in FORMATION_FAULTS:  # the communicator forms cleanly first
        ops.wait_tensor(ops.all_reduce(torch.ones(4), "sum", tag, ranks, world_size))
    c10d_func._C.set_shm_fault_for_test(kind)
    try:
        corrupted_call(kind, tag, ranks, world_size)
        return "no error"
    except RuntimeError as error:
        return str(error)
    finally:
        c10d_func._C.set_shm_fault_for_test("")


CORRUPTIONS = {
    "header": ("refusing segment", "region of"),
    "pid": ("rank 1 published a bad pid in the shared segment (-1)", "not a process"),
    "placement": ("rank 1 published a bad place for its input", "outside the members' memory"),
    "split": ("rank 1 published a bad split length", "-5 is outside"),
    "rounds": ("rank 1 published a bad number of rounds", "is outside"),
    "many_rounds": ("ran past the timeout", "a member published a count"),
}


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("kind", ["header", "pid", "placement", "split"])
def test_a_bad_value_from_a_peer_fails_every_member_naming_it(kind, world_size, request):
    # A member writes a value no correct member would (an offset into the header, a negative
    # split, a header of impossible sizes) where the others read it: every member checks it
    # before use and fails with a message naming the writer; nothing reads or writes out of
    # bounds (the suite also runs under ASan: scripts/sanitize.sh).
    pool = request.getfixturevalue(f"pool{world_size}")
    messages = pool.run(body_corrupted_peer, kind, f"corrupt-{kind}", timeout=120)
    for message in messages:
        for fragment in CORRUPTIONS[kind]:
            assert fragment in message, (kind, message.split("\nException raised")[0])


def body_values_rewritten_after_the_check(rank: int, world_size: int, tag: str) -> list[str]:
    """Member 1 writes impossible values where the others read them, after every member has
    checked them: the header's sizes once its communicator formed, its placements and its
    all_to_all directory entries in each collective. Checked values are never read again, so
    every result is the one computed here."""
    ranks = list(range(world_size))
    failures = []
    c10d_func._C.set_shm_fault_for_test("rewrite")
    try:
        formed = ops.wait_tensor(
            ops.all_reduce(torch.full((4,), rank + 1.0), "sum", tag, ranks, world_size)
        )
        total = world_size * (world_size + 1) / 2
        if not formed.eq(total).all():
            failures.append(f"rank {rank}: all_reduce as the group formed gave {formed}")
        # 8 MiB: the direct path, reading each member's input where it placed it.
        big = torch.arange(2 << 20, dtype=torch.float32) + rank
        reduced = ops.wait_tensor(ops.all_reduce(big, "sum", tag, ranks, world_size))
        expected = torch.arange(2 << 20, dtype=torch.float32) * world_size + (total - world_size)
        if not torch.equal(reduced, expected):
            failures.append(
                f"rank {rank}: 8 MiB all_reduce off by {(reduced - expected).abs().max()}"
            )
        # all_to_all: each member writes its pieces where the directory says they land.
        block = 1 << 16
        sent = torch.arange(world_size * block, dtype=torch.float32) + 1000 * rank
        moved = ops.wait_tensor(ops.all_to_all_single(sent, None, None, tag, ranks, world_size))
        expected_moved = torch.cat(
            [
                torch.arange(rank * block, (rank + 1) * block, dtype=torch.float32) + 1000 * peer
                for peer in ranks
            ]
        )
        if not torch.equal(moved, expected_moved):
            failures.append(f"rank {rank}: all_to_all gave blocks of the wrong members or places")
    except RuntimeError as error:
        failures.append(f"rank {rank}: {str(error).splitlines()[0]}")
    finally:
        c10d_func._C.set_shm_fault_for_test("")
    return failures


@pytest.mark.parametrize("world_size", [2, 4])
def test_values_a_peer_rewrites_after_the_check_are_not_read_again(world_size, request):
    # A value read from shared memory is checked once and used as checked: a peer (or any
    # process that maps the segment) writing it again between the check and the use changes
    # nothing. Without that, the header's sizes place the pool past the mapping, and a
    # placement or a directory entry rewritten after its check reads or writes wherever it
    # says (here inside the segment, so results are wrong; a far offset would fault).
    pool = request.getfixturevalue(f"pool{world_size}")
    tag = f"rewritten-{world_size}"
    assert_no_failures(pool.run(body_values_rewritten_after_the_check, tag, timeout=120))


@pytest.mark.parametrize("kind", ["rounds", "many_rounds"])
def test_a_bad_round_count_from_a_peer_fails_every_member_naming_it(kind):
    # all_to_all through the slots (no symmetric memory): members exchange their numbers of
    # rounds; an impossible one fails every member instead of looping on, and the largest one
    # believed (256 TiB in pieces) ends at the timeout, though every member meets every barrier.
    pool = WorkerPool(2, env={"C10D_FUNC_SHM_POOL_BYTES": "0", "C10D_FUNC_TIMEOUT": "5"})
    try:
        messages = pool.run(body_corrupted_peer, kind, f"corrupt-{kind}", timeout=120)
    finally:
        pool.close()
    for message in messages:
        for fragment in CORRUPTIONS[kind]:
            assert fragment in message, message
