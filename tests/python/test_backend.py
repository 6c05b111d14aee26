"""c10d_func as a torch.distributed backend (backend/, python/c10d_func/_backend.py).

Each pool's ranks call dist.init_process_group with the backend string under test once, at start;
every test then runs classic torch.distributed code on that default group (and on groups made
from it) and compares each result with a reference computed from every rank's known input.
Pools: backend "c10d_func" on its default CPU transport (shm on one host) and
"cpu:c10d_func,cuda:nccl" (cuda:gloo without a GPU) with the CPU transport forced to Gloo, at 2
and 4 ranks. The CUDA side of the backend is in test_cuda.py (NCCL at world size 1) and
test_cuda_ranks.py (these bodies on CUDA tensors over Gloo).
"""

from __future__ import annotations

import datetime
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import c10d_func
import pytest
import torch
import torch.distributed as dist
from error_text import reports_timeout
from reference import REDUCE_OPS, make_input, reduce_allowed, reduce_reference
from socket_table import store_connections_opened
from test_collectives import Checks, assert_no_failures
from worker_pool import WorkerPool

# The mixed form names NCCL for CUDA where there is a GPU; torch's ProcessGroupNCCL refuses to
# exist without one, so a CPU-only machine tests the same mixed string with Gloo for CUDA.
MIXED = "cpu:c10d_func,cuda:nccl" if torch.cuda.is_available() else "cpu:c10d_func,cuda:gloo"
BACKENDS = {
    "c10d_func": {},
    MIXED: {"C10D_FUNC_CPU_TRANSPORT": "gloo"},
}
DIST_OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}
DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


def setup_backend_world(rank: int, world_size: int) -> None:
    import os

    dist.init_process_group(os.environ["C10D_FUNC_TEST_BACKEND"], rank=rank, world_size=world_size)


@pytest.fixture(
    scope="module",
    params=[(b, n) for b in BACKENDS for n in (2, 4)],
    ids=[f"{b}-ws{n}" for b in BACKENDS for n in (2, 4)],
)
def backend_pool(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    backend, world_size = request.param
    env = {
        "C10D_FUNC_TEST_SETUP": "test_backend:setup_backend_world",
        "C10D_FUNC_TEST_BACKEND": backend,
        **BACKENDS[backend],
    }
    pool = WorkerPool(world_size, env=env)
    yield pool
    pool.close()


def inputs(
    world_size: int, shape: tuple[int, ...], dtype: torch.dtype, salt: int
) -> list[torch.Tensor]:
    """Every rank's input of a call, known to every rank without communication."""
    return [make_input(r, shape, dtype, salt) for r in range(world_size)]


class Check(Checks):
    """test_collectives' per-rank collector, exact by default, plus plain conditions."""

    def same(
        self, what: str, out: torch.Tensor, expected: torch.Tensor, exact: bool = True
    ) -> None:
        self.expect(what, out, expected, exact)

    def true(self, what: str, condition: bool) -> None:
        if not condition:
            self.failures.append(f"rank {self.rank}: {what}")

    def raises(
        self,
        what: str,
        call: Callable[[], Any],
        *phrases: str,
        errors: tuple[type[Exception], ...] = (RuntimeError,),
    ) -> None:
        """`call` raises one of `errors` whose message holds every one of `phrases`."""
        try:
            call()
        except errors as error:
            for phrase in phrases:
                self.true(f"{what}: error lacks {phrase!r}: {error}", phrase in str(error))
        else:
            self.true(f"{what}: did not raise", False)


# ------------------------------------------------------------------ every collective of the table


def body_reductions(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    salt = 0
    for dtype in DTYPES:
        for name in REDUCE_OPS:
            if not reduce_allowed(name, dtype):
                continue
            salt += 1
            every = inputs(world_size, (3, 5), dtype, salt)
            # avg of integers truncates, as NCCL's does; the reference sums and divides likewise.
            expected = reduce_reference(every, name)
            exact = not (name == "avg" and dtype.is_floating_point)
            t = every[rank].clone()
            dist.all_reduce(t, op=DIST_OPS[name])
            check.same(f"all_reduce {name} {dtype}", t, expected, exact)
            root = salt % world_size
            t = every[rank].clone()
            dist.reduce(t, dst=root, op=DIST_OPS[name])
            if rank == root:
                check.same(f"reduce {name} {dtype} root {root}", t, expected, exact)
            else:
                check.same(f"reduce {name} {dtype}: non-root tensor unchanged", t, every[rank])
            if dtype != torch.bool:
                big = inputs(world_size, (world_size * 2, 3), dtype, salt + 1000)
                out = torch.empty(2, 3, dtype=dtype)
                dist.reduce_scatter_tensor(out, big[rank].clone(), op=DIST_OPS[name])
                whole = reduce_reference(big, name)
                check.same(
                    f"reduce_scatter_tensor {name} {dtype}",
                    out,
                    whole[2 * rank : 2 * rank + 2],
                    exact,
                )
                out = torch.empty(2, 3, dtype=dtype)
                dist.reduce_scatter(
                    out, list(big[rank].clone().chunk(world_size)), op=DIST_OPS[name]
                )
                check.same(
                    f"reduce_scatter {name} {dtype}", out, whole[2 * rank : 2 * rank + 2], exact
                )
    # PREMUL_SUM: every contribution scaled by the factor, then summed.
    every = inputs(world_size, (4,), torch.float32, 99)
    t = every[rank].clone()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    check.same("all_reduce premul_sum", t, sum(every) * 0.5)
    t = every[rank].clone()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor([2.0])))
    check.same("all_reduce premul_sum (tensor factor)", t, sum(every) * 2.0)
    # all_reduce_coalesced: one collective for several tensors.
    a, b = inputs(world_size, (3,), torch.float64, 7), inputs(world_size, (2, 2), torch.float64, 8)
    ta, tb = a[rank].clone(), b[rank].clone()
    dist.all_reduce_coalesced([ta, tb])
    check.same("all_reduce_coalesced [0]", ta, sum(a))
    check.same("all_reduce_coalesced [1]", tb, sum(b))
    # Non-contiguous tensors are reduced in place.
    every = inputs(world_size, (4, 6), torch.float32, 11)
    t = every[rank].clone().t()
    dist.all_reduce(t)
    check.same("all_reduce of a transposed view", t, sum(every).t())
    return check.failures


def test_every_reduction_and_dtype(backend_pool):
    assert_no_failures(backend_pool.run(body_reductions))


def body_data_movement(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    for salt, dtype in enumerate(
        [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64, torch.uint8]
    ):
        every = inputs(world_size, (2, 3), dtype, salt)
        stacked = torch.cat(every)
        for root in range(world_size):
            t = every[rank].clone()
            dist.broadcast(t, src=root)
            check.same(f"broadcast {dtype} from {root}", t, every[root])
        out = torch.empty(2 * world_size, 3, dtype=dtype)
        dist.all_gather_into_tensor(out, every[rank])
        check.same(f"all_gather_into_tensor {dtype}", out, stacked)
        outs = [torch.empty(2, 3, dtype=dtype) for _ in range(world_size)]
        dist.all_gather(outs, every[rank])
        check.same(f"all_gather {dtype}", torch.cat(outs), stacked)
        root = salt % world_size
        gathered = (
            [torch.empty(2, 3, dtype=dtype) for _ in range(world_size)] if rank == root else None
        )
        dist.gather(every[rank], gathered, dst=root)
        if rank == root:
            check.same(f"gather {dtype} to {root}", torch.cat(gathered), stacked)
        out = torch.empty(2, 3, dtype=dtype)
        pieces = list(inputs(world_size, (2, 3), dtype, salt + 50)) if rank == root else None
        dist.scatter(out, pieces, src=root)
        check.same(
            f"scatter {dtype} from {root}", out, inputs(world_size, (2, 3), dtype, salt + 50)[rank]
        )
        # all_to_all_single, uneven: rank r sends (r + j + 1) rows to rank j.
        blocks = [
            [make_input(r * 100 + j, (r + j + 1, 2), dtype, salt) for j in range(world_size)]
            for r in range(world_size)
        ]
        send = torch.cat(blocks[rank])
        recv = torch.empty(sum(r + rank + 1 for r in range(world_size)), 2, dtype=dtype)
        dist.all_to_all_single(
            recv,
            send,
            output_split_sizes=[r + rank + 1 for r in range(world_size)],
            input_split_sizes=[rank + j + 1 for j in range(world_size)],
        )
        check.same(
            f"all_to_all_single uneven {dtype}",
            recv,
            torch.cat([blocks[r][rank] for r in range(world_size)]),
        )
        even = inputs(world_size, (world_size * 2, 3), dtype, salt + 70)
        recv = torch.empty(world_size * 2, 3, dtype=dtype)
        dist.all_to_all_single(recv, even[rank])
        check.same(
            f"all_to_all_single even {dtype}",
            recv,
            torch.cat([even[r][2 * rank : 2 * rank + 2] for r in range(world_size)]),
        )
        # all_to_all (lists): tensors of different sizes per peer.
        outs = [torch.empty(r + rank + 1, 2, dtype=dtype) for r in range(world_size)]
        dist.all_to_all(outs, [b.clone() for b in blocks[rank]])
        for r in range(world_size):
            check.same(f"all_to_all {dtype} from {r}", outs[r], blocks[r][rank])
    # all_gather_coalesced: several inputs in one collective.
    a, b = inputs(world_size, (3,), torch.float32, 5), inputs(world_size, (2, 2), torch.float32, 6)
    out_lists = [[torch.empty(3), torch.empty(2, 2)] for _ in range(world_size)]
    dist.all_gather_coalesced(out_lists, [a[rank], b[rank]])
    for r in range(world_size):
        check.same(f"all_gather_coalesced from {r} [0]", out_lists[r][0], a[r])
        check.same(f"all_gather_coalesced from {r} [1]", out_lists[r][1], b[r])
    # Coalesced into-tensor forms (what FSDP uses), through the coalescing manager.
    from torch.distributed.distributed_c10d import _coalescing_manager

    x, y = inputs(world_size, (4,), torch.float32, 21), inputs(world_size, (6,), torch.float32, 22)
    ox, oy = torch.empty(4 * world_size), torch.empty(6 * world_size)
    with _coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(ox, x[rank])
        dist.all_gather_into_tensor(oy, y[rank])
    cm.wait()
    check.same("coalesced all_gather_into_tensor [0]", ox, torch.cat(x))
    check.same("coalesced all_gather_into_tensor [1]", oy, torch.cat(y))
    rx, ry = torch.empty(4), torch.empty(6)
    bx = inputs(world_size, (4 * world_size,), torch.float32, 23)
    by = inputs(world_size, (6 * world_size,), torch.float32, 24)
    with _coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(rx, bx[rank])
        dist.reduce_scatter_tensor(ry, by[rank])
    cm.wait()
    check.same("coalesced reduce_scatter_tensor [0]", rx, sum(bx)[4 * rank : 4 * rank + 4])
    check.same("coalesced reduce_scatter_tensor [1]", ry, sum(by)[6 * rank : 6 * rank + 6])
    dist.barrier()
    return check.failures


def test_every_data_movement_collective(backend_pool):
    assert_no_failures(backend_pool.run(body_data_movement))


def private_blocks_of_world() -> int | None:
    """Blocks the cache of private host memory has handed out, where the world group's CPU
    communicator is Gloo (None on shm, whose symmetric memory served staging copies before too)."""
    tag = f"ptd:{dist.group.WORLD.group_name}"
    (group,) = [g for g in c10d_func.groups() if g["tag"] == tag and g["device"] == "cpu"]
    return group["memory"]["private_allocations"] if group["backend"] == "gloo" else None


def body_large_list_forms(rank: int, world_size: int) -> list[str]:
    """The classic calls whose tensor lists the backend packs into one buffer (all_gather,
    all_to_all, gather, scatter, reduce_scatter, coalesced all_reduce, reduce's scratch on the
    non-roots), at a size where that buffer comes from the communicator's memory: results against
    references, the callers' inputs untouched, and on Gloo the buffers drawn from the cache of
    private host memory (on shm they lie in symmetric memory, which the counters cannot tell from
    the staging copy that a buffer of torch's allocator would get there)."""
    check = Check(rank)
    rows = (1 << 16) + 3  # 256 KiB of float32 per piece, odd
    every = inputs(world_size, (rows,), torch.float32, 1)
    stacked = torch.cat(every)
    before = private_blocks_of_world()
    mine = every[rank].clone()
    outs = [torch.empty(rows) for _ in range(world_size)]
    dist.all_gather(outs, mine)
    check.same("all_gather (list)", torch.cat(outs), stacked)
    root = world_size - 1
    gathered = [torch.empty(rows) for _ in range(world_size)] if rank == root else None
    dist.gather(mine, gathered, dst=root)
    if rank == root:
        check.same("gather (list)", torch.cat(gathered), stacked)
    out = torch.empty(rows)
    dist.scatter(out, every if rank == root else None, src=root)
    check.same("scatter (list)", out, every[rank])

    # A list of in-order chunks of one tensor is read (scatter's) or written (gather's and
    # all_gather's, the own block given in place) as that tensor, with no packed buffer; the same
    # chunks out of order, or strided, are packed.
    def forms(base: torch.Tensor) -> dict[str, list[torch.Tensor]]:
        chunks = list(base.chunk(world_size))
        strided = torch.stack([base, base], 1)[:, 0]  # base's values, every other element
        return {
            "chunks": chunks,
            "chunks reversed": chunks[::-1],
            "strided chunks": list(strided.chunk(world_size)),
        }

    def drawn_by(what: str, counted: bool, call, *args, **kwargs) -> None:
        before = private_blocks_of_world()
        call(*args, **kwargs)
        if before is None or not counted:
            return
        drawn = private_blocks_of_world() - before
        if (drawn == 0) != what.endswith("(chunks)"):
            check.failures.append(f"rank {rank}: {what} drew {drawn} packed buffers")

    for what, pieces in forms(stacked).items():
        out = torch.empty(rows)
        root_list = pieces if rank == root else None
        drawn_by(f"scatter ({what})", rank == root, dist.scatter, out, root_list, src=root)
        check.same(f"scatter ({what})", out, pieces[rank])
        into = forms(torch.empty_like(stacked))[what]
        root_list = into if rank == root else None
        drawn_by(f"gather ({what})", rank == root, dist.gather, mine, root_list, dst=root)
        if rank == root:
            check.same(f"gather ({what})", torch.cat(into), stacked)
        into = forms(torch.empty_like(stacked))[what]
        into[rank].copy_(every[rank])
        drawn_by(f"all_gather ({what})", True, dist.all_gather, into, into[rank])
        check.same(f"all_gather ({what})", torch.cat(into), stacked)
    check.same("scatter's input untouched", stacked, torch.cat(every))
    blocks = [  # rank r sends blocks[r][j], of rows + j elements, to rank j
        [make_input(r * 100 + j, (rows + j,), torch.float32, 10) for j in range(world_size)]
        for r in range(world_size)
    ]
    sent = [blocks[rank][j].clone() for j in range(world_size)]
    outs = [torch.empty(rows + rank) for _ in range(world_size)]
    dist.all_to_all(outs, sent)
    for r in range(world_size):
        check.same(f"all_to_all (list) from {r}", outs[r], blocks[r][rank][: rows + rank])
    pieces = [inputs(world_size, (rows,), torch.float32, 30 + j) for j in range(world_size)]
    out = torch.empty(rows)
    dist.reduce_scatter(out, [pieces[j][rank].clone() for j in range(world_size)])
    check.same("reduce_scatter (list)", out, sum(pieces[rank]), exact=False)
    pair = [every[rank].clone(), stacked.clone()]
    dist.all_reduce_coalesced(pair)
    check.same("all_reduce_coalesced [0]", pair[0], sum(every), exact=False)
    check.same("all_reduce_coalesced [1]", pair[1], stacked * world_size, exact=False)
    kept = every[rank].clone()
    dist.reduce(kept, dst=root)
    expected = sum(every) if rank == root else every[rank]  # a non-root's tensor stays as it was
    check.same(f"reduce to {root}", kept, expected, exact=rank != root)
    check.same("inputs untouched", mine, every[rank])
    after = private_blocks_of_world()
    if before is not None and after - before < 6:
        check.failures.append(
            f"rank {rank}: the packed buffers did not come from the private cache "
            f"({before} -> {after} blocks)"
        )
    return check.failures


def test_large_list_forms_stage_in_the_communicators_memory(backend_pool):
    assert_no_failures(backend_pool.run(body_large_list_forms, timeout=180))


def body_point_to_point(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    # Blocking send/recv around a ring, both directions in flight at once (each rank sends
    # first): a deadlock here would hang, and the pool's timeout fails the test.
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    got = torch.empty(5, dtype=torch.float64)
    reqs = [dist.isend(make_input(rank, (5,), torch.float64, 1), right), dist.irecv(got, left)]
    for req in reqs:
        req.wait()
    check.same("isend/irecv ring", got, make_input(left, (5,), torch.float64, 1))
    # batch_isend_irecv, and tags: two messages on different tags received in the other order.
    a, b = torch.empty(3), torch.empty(3)
    ops = [
        dist.P2POp(dist.isend, make_input(rank, (3,), torch.float32, 2), right, tag=1),
        dist.P2POp(dist.isend, make_input(rank, (3,), torch.float32, 3), right, tag=2),
        dist.P2POp(dist.irecv, b, left, tag=2),
        dist.P2POp(dist.irecv, a, left, tag=1),
    ]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    check.same("batch_isend_irecv tag 1", a, make_input(left, (3,), torch.float32, 2))
    check.same("batch_isend_irecv tag 2", b, make_input(left, (3,), torch.float32, 3))
    # Blocking forms, one direction; several messages arrive in order; a non-contiguous target.
    if rank == 0:
        for i in range(3):
            dist.send(torch.full((2, 2), float(i)), dst=world_size - 1)
    elif rank == world_size - 1:
        for i in range(3):
            t = torch.empty(2, 2).t()
            dist.recv(t, src=0)
            check.same(f"send/recv message {i}", t, torch.full((2, 2), float(i)))
    dist.barrier()
    return check.failures


def test_send_and_recv(backend_pool):
    assert_no_failures(backend_pool.run(body_point_to_point))


def message_tensor(value: float, numel: int, strided: bool) -> torch.Tensor:
    """`numel` values from `value` up; a transposed (non-contiguous) view when `strided`."""
    flat = torch.arange(numel, dtype=torch.float32) + value
    if not strided or numel % 2:
        return flat
    return flat.view(2, numel // 2).t().contiguous().t()  # same values, column-major storage


def body_messages_on_formed_channels(rank: int, world_size: int) -> list[str]:
    """Many messages on the same channels, once formed: a CPU message posted while its channel
    is idle is issued by the caller, one posted behind others by the channel's thread, so both
    paths interleave here and must keep each channel's order."""
    check = Check(rank)
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    sizes = [2, 7, 1 << 10, 20_000, 300_000]  # both sides of the small-message threshold
    for round_index in range(15):
        numel = sizes[round_index % len(sizes)]
        strided = round_index % 3 == 1
        # An exchange with both neighbours, every send posted before any recv.
        got_left = torch.empty(numel) if not strided else message_tensor(0, numel, True)
        got_right = torch.empty(numel)
        works = [
            dist.isend(message_tensor(1000 * rank + round_index, numel, strided), right),
            dist.isend(message_tensor(-1000 * rank - round_index, numel, False), left),
            dist.irecv(got_left, left),
            dist.irecv(got_right, right),
        ]
        for work in reversed(works) if round_index % 2 else works:
            work.wait()
        check.same(
            f"round {round_index} from the left",
            got_left.reshape(-1),
            message_tensor(1000 * left + round_index, numel, False),
        )
        check.same(
            f"round {round_index} from the right",
            got_right,
            message_tensor(-1000 * right - round_index, numel, False),
        )
    # A burst on one channel, received in order and waited last to first.
    count = 40
    if rank == 0:
        works = [dist.isend(torch.full((3,), float(i)), 1) for i in range(count)]
    elif rank == 1:
        outs = [torch.empty(3) for _ in range(count)]
        works = [dist.irecv(out, 0) for out in outs]
    if rank in (0, 1):
        for work in reversed(works):
            work.wait()
    if rank == 1:
        for i, out in enumerate(outs):
            check.same(f"burst message {i}", out, torch.full((3,), float(i)))
    # A send nobody waits: delivered all the same (torch allows dropping an isend's Work).
    if rank == 0:
        dist.isend(torch.full((4,), 7.0), 1)
    elif rank == 1:
        got = torch.empty(4)
        dist.recv(got, 0)
        check.same("unwaited isend", got, torch.full((4,), 7.0))
    dist.barrier()
    return check.failures


def test_messages_on_formed_channels_keep_order_and_values(backend_pool):
    assert_no_failures(backend_pool.run(body_messages_on_formed_channels, timeout=120))


def message_of(sender: int, index: int) -> torch.Tensor:
    """The index-th message `sender` sends in body_recv_from_any_source: it names both."""
    return torch.full((6,), float(100 * sender + index))


def body_recv_from_any_source(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    others = [r for r in range(world_size) if r != rank]
    # As torch's test_send_recv_any_source: each rank in turn receives two messages from every
    # other, by recv and by irecv with no src, while the others send theirs. The source each
    # call reports must be the sender whose message arrived, each sender's two in the order sent.
    for receiver in range(world_size):
        if receiver != rank:
            dist.send(message_of(rank, 0), receiver)
            dist.send(message_of(rank, 1), receiver)
            continue
        seen: dict[int, list[float]] = {r: [] for r in others}
        for i in range(2 * len(others)):
            out = torch.full((6,), -1.0)
            if i % 2 == 0:
                source = dist.recv(out)
            else:
                work = dist.irecv(out)
                work.wait()
                source = work._source_rank()
            if source not in seen or not out.eq(out[0]).all():
                check.true(f"any source: bad message {out.tolist()} from {source}", False)
                continue
            seen[source].append(out[0].item())
        for sender in others:
            check.true(
                f"any source: rank {sender}'s messages {seen[sender]}, in order",
                seen[sender] == [100.0 * sender, 100.0 * sender + 1],
            )
    dist.barrier()

    # A recv naming its source, then recvs from any source, on one tag: the named one takes the
    # last rank's message, the others take everyone else's (counts of named recvs are kept).
    last = world_size - 1
    if rank == 0:
        named = torch.empty(6)
        dist.recv(named, src=last, tag=5)
        check.same("named recv among any-source ones", named, message_of(last, 0))
        sources = sorted(dist.recv(torch.empty(6), tag=5) for _ in range(world_size - 2))
        check.true(f"any source after a named recv: {sources}", sources == list(range(1, last)))
    else:
        dist.send(message_of(rank, 0), 0, tag=5)

    # The other way round: a recv from any source, then one naming the sender, on one tag. Recvs
    # are matched in the order posted, as on Gloo: the first takes the sender's first message.
    if rank == 0:
        first, second = torch.empty(6), torch.empty(6)
        any_work = dist.irecv(first, tag=6)
        named_work = dist.irecv(second, src=last, tag=6)
        named_work.wait()
        any_work.wait()
        check.true("any source first: its source", any_work._source_rank() == last)
        check.same("any source posted first takes the first message", first, message_of(last, 0))
        check.same("the named recv after it takes the second", second, message_of(last, 1))
    elif rank == last:
        dist.send(message_of(last, 0), 0, tag=6)
        dist.send(message_of(last, 1), 0, tag=6)

    # Tags apart: a recv from any source on tag 8 does not take rank 1's earlier message on 7.
    if rank == 1:
        works = [dist.isend(message_of(1, 7), 0, tag=7), dist.isend(message_of(1, 8), 0, tag=8)]
        for work in works:
            work.wait()
    elif rank == 0:
        on_eight, on_seven = torch.empty(6), torch.empty(6)
        check.true("tag 8 from rank 1", dist.recv(on_eight, tag=8) == 1)
        check.true("tag 7 from rank 1", dist.recv(on_seven, tag=7) == 1)
        check.same("any source, tag 8", on_eight, message_of(1, 8))
        check.same("any source, tag 7", on_seven, message_of(1, 7))

    # The source is known once a message is taken: before, _source_rank() is -1, as on Gloo.
    if rank == 0:
        early = dist.irecv(torch.empty(6), tag=9)
        check.true("source before a message", early._source_rank() == -1)
    dist.barrier()
    if rank == 1:
        dist.send(message_of(1, 9), 0, tag=9)
    elif rank == 0:
        early.wait()
        check.true("source once received", early._source_rank() == 1)

    # Once a channel has formed (on shm: its messages are then shown to the receiver in shared
    # memory, not counted in the store), a recv from any source still takes every message, in
    # order, one at a time as a request and reply would send them.
    if rank in (0, 1):
        for i in range(20):
            if rank == 1:
                dist.send(message_of(1, 10 + i), 0, tag=10)
                dist.recv(torch.empty(1), 0, tag=11)
            else:
                out = torch.full((6,), -1.0)
                source = dist.recv(out, tag=10)
                if source != 1 or not out.equal(message_of(1, 10 + i)):
                    check.true(f"formed channel, message {i}: {out.tolist()} from {source}", False)
                dist.send(torch.ones(1), 1, tag=11)
    dist.barrier()

    # In a subgroup, recv from any source returns the sender's global rank.
    if world_size >= 3:
        members = list(range(world_size - 1, 0, -1))  # [3, 2, 1] at 4 ranks
        sub = dist.new_group(members, backend="c10d_func")
        if rank == members[0]:
            sources = sorted(dist.recv(torch.empty(6), group=sub) for _ in members[1:])
            check.true(f"subgroup sources are global ranks: {sources}", sources == members[:0:-1])
        elif rank in members:
            dist.send(message_of(rank, 0), members[0], group=sub)
        dist.destroy_process_group(sub)

    # No message at all: the recv fails at the group's timeout, saying so, instead of hanging.
    # ProcessGroup.set_timeout reaches every backend of the group in torch 2.11 and 2.14 alike
    # (2.11's _set_pg_timeout reaches only Gloo's and NCCL's).
    group = dist.new_group(backend="c10d_func", timeout=datetime.timedelta(seconds=60))
    dist.barrier(group=group)
    group.set_timeout(datetime.timedelta(seconds=1))
    if rank == 0:
        check.raises(
            "any source with no sender",
            lambda: dist.recv(torch.empty(6), group=group, tag=3),
            "recv from any source (tag 3)",
            "no member's message arrived within 1000 ms",
        )
    dist.barrier()
    dist.destroy_process_group(group)
    return check.failures


def test_recv_from_any_source(backend_pool):
    assert_no_failures(backend_pool.run(body_recv_from_any_source))


def body_async_works(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    every = inputs(world_size, (1 << 16,), torch.float32, 31)
    t = every[rank].clone()
    work = dist.all_reduce(t, async_op=True)
    check.true("async all_reduce returns a Work", work is not None)
    fut = work.get_future()
    work.wait()
    check.true("completed after wait", work.is_completed() and work.is_success())
    check.same("async all_reduce", t, sum(every))
    value = fut.wait()
    check.true(
        f"future value is the list of outputs: {type(value)}",
        isinstance(value, list) and value[0] is not None,
    )
    check.same("future value", value[0], sum(every))
    # Many in flight at once, waited in reverse order.
    works, tensors = [], []
    for i in range(8):
        x = inputs(world_size, (257,), torch.float64, 40 + i)
        tensors.append((x[rank].clone(), sum(x)))
        works.append(dist.all_reduce(tensors[-1][0], async_op=True))
    for work in reversed(works):
        work.wait()
    for i, (t, expected) in enumerate(tensors):
        check.same(f"in-flight all_reduce {i}", t, expected)
    # A future's callback sees the result (what DDP comm hooks do).
    t = every[rank].clone()
    chained = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    check.same("future.then", chained.wait(), sum(every) * 2)
    w = dist.barrier(async_op=True)
    w.wait()
    return check.failures


def test_async_works_and_futures(backend_pool):
    assert_no_failures(backend_pool.run(body_async_works))


# ------------------------------------------------------------------------------- bad input


def body_bad_input(rank: int, world_size: int) -> list[str]:
    check = Check(rank)

    def raises(what: str, fn: Any, *needles: str) -> None:
        check.raises(what, fn, *needles, errors=(RuntimeError, ValueError, TypeError))

    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    raises(
        "bad root",
        lambda: backend.broadcast([torch.ones(2)], _opts("BroadcastOptions", rootRank=world_size)),
        "broadcast",
        "root",
    )
    raises(
        "bad root of reduce",
        lambda: backend.reduce([torch.ones(2)], _opts("ReduceOptions", rootRank=-1)),
        "reduce",
        "root",
    )
    raises(
        "all_gather_into_tensor size",
        lambda: dist.all_gather_into_tensor(torch.empty(3), torch.ones(2)),
        "all_gather_into_tensor",
        "elements",
    )
    # (torch's Python wrapper refuses mixed dtypes itself; the backend does too when called directly)
    raises(
        "all_gather dtype",
        lambda: backend.allgather(
            [[torch.empty(2, dtype=torch.int32) for _ in range(world_size)]], [torch.ones(2)]
        ),
        "allgather",
        "dtype",
    )
    raises(
        "reduce_scatter_tensor size",
        lambda: dist.reduce_scatter_tensor(torch.empty(2), torch.ones(2 * world_size + 1)),
        "reduce_scatter_tensor",
        "elements",
    )
    raises(
        "bitwise on floats", lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND), "BAND"
    )
    raises(
        "uneven splits",
        lambda: dist.all_to_all_single(
            torch.empty(world_size),
            torch.ones(world_size),
            input_split_sizes=[world_size] + [1] * (world_size - 1),
        ),
        "all_to_all_single",
        "split",
    )
    raises("send to self", lambda: backend.send([torch.ones(1)], rank, 0), "itself")
    # The group still works after every refusal (nothing was half-issued).
    t = torch.ones(3)
    dist.all_reduce(t)
    check.same("all_reduce after refusals", t, torch.full((3,), float(world_size)))
    return check.failures


def _opts(kind: str, **fields: Any) -> Any:
    from torch._C import _distributed_c10d as c10d

    opts = getattr(c10d, kind)()
    for name, value in fields.items():
        setattr(opts, name, value)
    return opts


def test_bad_input_raises_clear_errors(backend_pool):
    assert_no_failures(backend_pool.run(body_bad_input))


def body_missing_peer(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    # Every rank makes the group; only rank 0 calls the collective, so rank 0's must time out
    # (group timeout 2 s) naming a rank that did not take part. The group forms with a long
    # timeout (on a loaded machine its members may arrive more than 2 s apart), then takes the
    # short one, as torch sets it (Backend::setTimeout).
    group = dist.new_group(backend="c10d_func", timeout=datetime.timedelta(seconds=60))
    dist.barrier(group=group)
    dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=2), group)
    if rank == 0:
        try:
            dist.all_reduce(torch.ones(4), group=group)
            check.true("all_reduce without peers should fail", False)
        except RuntimeError as error:
            check.true(f"reports the group's 2 s timeout: {error}", reports_timeout(str(error), 2))
            check.true(
                f"error names a missing rank: {error}",
                any(
                    f"rank {r}" in str(error) or f"[{r}" in str(error) or f" {r}]" in str(error)
                    for r in range(1, world_size)
                ),
            )
        # Forming a group whose other members never come also fails, naming them.
        from torch.distributed.distributed_c10d import _get_default_store

        store = dist.PrefixStore(f"missing-peer-test/{time.time_ns()}/", _get_default_store())
        try:
            c10d_func._C.create_backend(store, 0, world_size, 1.0, "never", list(range(world_size)))
            check.true("a group without its members should fail to form", False)
        except RuntimeError as error:
            check.true(
                f"formation error names the absent ranks: {error}",
                "never arrived" in str(error) and "1" in str(error),
            )
    return check.failures


def test_missing_peer_times_out_naming_it(backend_pool):
    assert_no_failures(backend_pool.run(body_missing_peer, timeout=120))


# ------------------------------------------------------- torch's own users of a process group


def body_torch_funcol(rank: int, world_size: int) -> list[str]:
    import torch.distributed._functional_collectives as tfuncol

    check = Check(rank)
    group = dist.group.WORLD
    every = inputs(world_size, (4, 2), torch.float32, 61)
    check.same("torch funcol all_reduce", tfuncol.all_reduce(every[rank], "sum", group), sum(every))
    check.same(
        "torch funcol all_gather_tensor",
        tfuncol.all_gather_tensor(every[rank], 0, group),
        torch.cat(every),
    )
    big = inputs(world_size, (4 * world_size, 2), torch.float32, 62)
    check.same(
        "torch funcol reduce_scatter_tensor",
        tfuncol.reduce_scatter_tensor(big[rank], "sum", 0, group),
        sum(big)[4 * rank : 4 * rank + 4],
    )
    check.same(
        "torch funcol all_to_all_single",
        tfuncol.all_to_all_single(big[rank], None, None, group),
        torch.cat([big[r][4 * rank : 4 * rank + 4] for r in range(world_size)]),
    )
    check.same("torch funcol broadcast", tfuncol.broadcast(every[rank], 1, group), every[1])

    def step(x: torch.Tensor) -> torch.Tensor:
        return tfuncol.all_reduce(x * 2, "sum", group) + 1

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    check.same("torch funcol compiled", compiled(every[rank]), sum(every) * 2 + 1)
    # c10d_func's own functional ops on the same group share its communicator.
    before = [g for g in c10d_func.groups() if g["origin"] == "created"]
    check.same(
        "c10d_func funcol on the group", c10d_func.all_reduce(every[rank], "sum", group), sum(every)
    )
    after = [g for g in c10d_func.groups() if g["origin"] == "created"]
    check.true(f"no second communicator for the group: {after}", len(after) == len(before))
    return check.failures


def test_torch_functional_collectives_on_this_backend(backend_pool):
    assert_no_failures(backend_pool.run(body_torch_funcol))


def _train(
    model: torch.nn.Module,
    steps: int,
    rank: int,
    world_size: int,
    opt: torch.optim.Optimizer | None = None,
) -> list[torch.Tensor]:
    """`steps` steps of `opt` (SGD by default) on this rank's known batches."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        # Drawn on the CPU (the same values on every device), then moved to the model's device.
        g = torch.Generator().manual_seed(1000 * step + rank)
        device = torch.get_default_device()
        x = torch.randn(8, 6, generator=g, device="cpu").to(device)
        y = torch.randn(8, 3, generator=g, device="cpu").to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def body_ddp(rank: int, world_size: int) -> list[str]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    check = Check(rank)
    gloo = dist.new_group(backend="gloo")
    # Different initial weights per rank: DDP's construction broadcasts rank 0's.
    ours = _train(DDP(_mlp(rank)), 4, rank, world_size)
    reference = _train(DDP(_mlp(rank), process_group=gloo), 4, rank, world_size)
    for i, (a, b) in enumerate(zip(ours, reference)):
        check.same(f"DDP parameter {i} vs DDP on gloo", a, b, exact=False)
    # Parameters agree across ranks (compare with rank 0's via an independent gloo broadcast).
    for i, p in enumerate(ours):
        rank0 = p.clone()
        dist.broadcast(rank0, 0, group=gloo)
        check.same(f"DDP parameter {i} equal on every rank", p, rank0)
    return check.failures


def test_ddp_trains_as_on_gloo(backend_pool):
    assert_no_failures(backend_pool.run(body_ddp, timeout=180))


def body_ddp_algorithms(rank: int, world_size: int) -> list[str]:
    """torch.distributed.algorithms on this backend and on a Gloo group, the same steps: DDP's
    communication hooks (fp16 and bf16 compression, PowerSGD, which chain on the Works'
    futures), ZeroRedundancyOptimizer (a broadcast of each rank's shard per step), Join with
    uneven inputs (the joined ranks shadow the others' all_reduces) and the autograd-aware
    collectives of torch.distributed.nn."""
    import torch.distributed.nn.functional as dist_nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    from torch.distributed.algorithms.join import Join
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    check = Check(rank)
    gloo = dist.new_group(backend="gloo")

    def hooked(group: Any, hook: Any, state: Any = None) -> list[torch.Tensor]:
        model = DDP(_mlp(rank), process_group=group)
        model.register_comm_hook(state, hook)
        return _train(model, 4, rank, world_size)

    def power_sgd(group: Any) -> list[torch.Tensor]:
        state = powerSGD_hook.PowerSGDState(
            process_group=group,
            matrix_approximation_rank=1,
            start_powerSGD_iter=2,  # plain all_reduce first, then compressed
            min_compression_rate=0.5,
            random_seed=0,
        )
        return hooked(group, powerSGD_hook.powerSGD_hook, state)

    def zero(group: Any) -> list[torch.Tensor]:
        module = _mlp(rank)
        optimizer = ZeroRedundancyOptimizer(
            module.parameters(), optimizer_class=torch.optim.Adam, process_group=group, lr=0.01
        )
        return _train(DDP(module, process_group=group), 3, rank, world_size, optimizer)

    def uneven(group: Any) -> list[torch.Tensor]:
        model = DDP(_mlp(rank), process_group=group)
        with Join([model]):
            return _train(model, 2 + rank, rank, world_size)  # rank r has 2 + r batches

    # Compressed hooks reduce in fp16/bf16, where Gloo's summation order differs from
    # c10d_func's: equal up to those formats' rounding.
    runs = {
        "fp16_compress_hook": (lambda g: hooked(g, default_hooks.fp16_compress_hook), 2e-3),
        "bf16_compress_hook": (lambda g: hooked(g, default_hooks.bf16_compress_hook), 2e-2),
        "PowerSGD": (power_sgd, None),
        "ZeroRedundancyOptimizer": (zero, None),
        "Join with uneven inputs": (uneven, None),
    }
    for name, (run, tolerance) in runs.items():
        for i, (ours, theirs) in enumerate(zip(run(None), run(gloo))):
            if tolerance is None:
                check.same(f"{name}: parameter {i} vs on gloo", ours, theirs, exact=False)
            else:
                check.true(
                    f"{name}: parameter {i} vs on gloo, {(ours - theirs).abs().max()} apart",
                    torch.allclose(ours, theirs, rtol=tolerance, atol=tolerance),
                )
    x = torch.full((3,), float(rank + 1), requires_grad=True)
    y = dist_nn.all_reduce(x * 2)
    y.sum().backward()
    total = float(sum(range(1, world_size + 1)))
    check.same("torch.distributed.nn all_reduce", y.detach(), torch.full((3,), 2 * total))
    # Its backward all-reduces the output's gradient (ones from every rank), times 2.
    check.same(
        "torch.distributed.nn all_reduce backward", x.grad, torch.full((3,), 2.0 * world_size)
    )
    return check.failures


def test_ddp_algorithms_train_as_on_gloo(backend_pool):
    assert_no_failures(backend_pool.run(body_ddp_algorithms, timeout=240))


def cpu_memory_of_world() -> dict[str, int] | None:
    """The symmetric-memory counters of the world group's CPU communicator; None where its
    transport has no symmetric memory (Gloo)."""
    tag = f"ptd:{dist.group.WORLD.group_name}"
    (group,) = [g for g in c10d_func.groups() if g["tag"] == tag and g["device"] == "cpu"]
    return group["memory"] if group["backend"] == "shm" else None


def body_fsdp(rank: int, world_size: int) -> list[str]:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    check = Check(rank)
    gloo = dist.new_group(backend="gloo")
    device = torch.get_default_device().type
    # The third run: FSDP2's comm buffers from this backend's allocate_tensor (torch 2.9+).
    runs = [(dist.group.WORLD, False), (gloo, False), (dist.group.WORLD, True)]
    results = []
    allocations = []
    for group, from_group in runs:
        mesh = DeviceMesh.from_group(group, device)
        model = _mlp(0)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        if from_group:
            if not hasattr(model, "set_allocate_memory_from_process_group_for_comm"):
                break  # this torch's FSDP2 cannot ask a group for its buffers
            for module in model.modules():  # each module's own parameter group
                if hasattr(module, "set_allocate_memory_from_process_group_for_comm"):
                    module.set_allocate_memory_from_process_group_for_comm(True)
        before = cpu_memory_of_world() if device == "cpu" else None
        params = _train(model, 3, rank, world_size)
        results.append(
            [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
        )
        if before is not None:
            after = cpu_memory_of_world()
            allocations.append(
                sum(after[k] - before[k] for k in ("allocations", "reuses", "fallbacks"))
            )
        del params
    for run in range(2, len(results)):
        for i, (a, b) in enumerate(zip(results[run], results[1])):
            check.same(
                f"FSDP2 parameter {i} ({'buffers from the group' if run == 2 else 'default'}) "
                "vs FSDP2 on gloo",
                a.detach(),
                b.detach(),
                exact=False,
            )
    for i, (a, b) in enumerate(zip(results[0], results[1])):
        check.same(f"FSDP2 parameter {i} vs FSDP2 on gloo", a.detach(), b.detach(), exact=False)
    if len(allocations) == 3:
        # Asked for its buffers, the group hands FSDP2 blocks of its symmetric memory: more
        # blocks than the run that allocated them with torch.empty (its outputs' only).
        check.true(
            f"FSDP2 buffers from symmetric memory (allocations {allocations})",
            allocations[2] > allocations[0],
        )
    return check.failures


def test_fsdp2_trains_as_on_gloo(backend_pool):
    assert_no_failures(backend_pool.run(body_fsdp, timeout=180))


def _object_of(rank: int) -> dict[str, Any]:
    """A picklable object every rank can build for any rank: sizes differ by rank (one of them
    larger than a page of every transport's small-message path), with a tensor inside."""
    return {
        "rank": rank,
        "text": "c10d_func" * (1 + 9000 * (rank % 2)),
        "list": list(range(rank + 2)),
        "tensor": torch.arange(rank + 3, dtype=torch.float64) * (rank + 1),
    }


def _same_object(a: Any, b: Any) -> bool:
    if not (isinstance(a, dict) and isinstance(b, dict)) or a.keys() != b.keys():
        return False
    return all(
        torch.equal(a[k], b[k]) if isinstance(b[k], torch.Tensor) else a[k] == b[k] for k in b
    )


def body_object_collectives(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    everyone = [_object_of(r) for r in range(world_size)]
    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, _object_of(rank))
    check.true(
        "all_gather_object: every rank's object in rank order",
        all(_same_object(g, e) for g, e in zip(gathered, everyone)),
    )
    src = world_size - 1
    listed: list[Any] = [_object_of(src), "second"] if rank == src else [None, None]
    dist.broadcast_object_list(listed, src=src)
    check.true(
        f"broadcast_object_list from {src}",
        _same_object(listed[0], everyone[src]) and listed[1] == "second",
    )
    dst = 1
    collected: list[Any] | None = [None] * world_size if rank == dst else None
    dist.gather_object(_object_of(rank), collected, dst=dst)
    if rank == dst:
        check.true(
            f"gather_object to {dst}",
            collected is not None and all(_same_object(g, e) for g, e in zip(collected, everyone)),
        )
    received: list[Any] = [None]
    dist.scatter_object_list(
        received, [_object_of(10 + r) for r in range(world_size)] if rank == 0 else None, src=0
    )
    check.true("scatter_object_list from 0", _same_object(received[0], _object_of(10 + rank)))
    # On a group of every other rank, its roots named by group rank (torch 2.6+).
    evens = list(range(0, world_size, 2))
    sub = dist.new_group(evens)
    if rank in evens:
        gathered = [None] * len(evens)
        dist.all_gather_object(gathered, _object_of(rank), group=sub)
        check.true(
            f"all_gather_object on group {evens}",
            all(_same_object(g, everyone[r]) for g, r in zip(gathered, evens)),
        )
        listed = [_object_of(evens[-1]) if rank == evens[-1] else None]
        dist.broadcast_object_list(listed, group=sub, group_src=len(evens) - 1)
        check.true(
            f"broadcast_object_list on group {evens} from group rank {len(evens) - 1}",
            _same_object(listed[0], everyone[evens[-1]]),
        )
    return check.failures


def test_object_collectives_as_on_gloo(backend_pool):
    """What checkpointing, launchers and trainers exchange metadata with: pickled objects as byte
    tensors of every member's size, gathered after an all_gather of the sizes."""
    assert_no_failures(backend_pool.run(body_object_collectives))


def body_distributed_checkpoint(rank: int, world_size: int) -> list[str]:
    import shutil
    import tempfile

    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    check = Check(rank)
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
    where = [tempfile.mkdtemp(prefix="c10d_func_dcp_") if rank == 0 else None]
    dist.broadcast_object_list(where, src=0)  # one folder, as on a shared file system
    # Known full tensors, built alike on every rank; each rank saves its shards only.
    rows = torch.arange(world_size * 4 * 3, dtype=torch.float32).reshape(world_size * 4, 3)
    cols = (torch.arange(5 * 2 * world_size) % 7).to(torch.bfloat16).reshape(5, 2 * world_size)
    saved = {
        "rows": DTensor.from_local(rows[4 * rank : 4 * rank + 4].clone(), mesh, [Shard(0)]),
        "cols": DTensor.from_local(cols[:, 2 * rank : 2 * rank + 2].contiguous(), mesh, [Shard(1)]),
        "replicated": torch.full((3,), 3.0),
        "step": 7,
    }
    try:
        dcp.save(saved, checkpoint_id=where[0])
        # Loaded into other placements: each rank reads the parts of other ranks' shards its
        # new placement needs (5 rows as Shard(0): torch.chunk's uneven split).
        fresh = {"src_data_rank": None}  # each rank takes its part of zeros, no communication
        loaded = {
            "rows": distribute_tensor(torch.zeros_like(rows), mesh, [Replicate()], **fresh),
            "cols": distribute_tensor(torch.zeros_like(cols), mesh, [Shard(0)], **fresh),
            "replicated": torch.zeros(3),
            "step": 0,
        }
        dcp.load(loaded, checkpoint_id=where[0])
        check.same("DCP: Shard(0) saved, loaded replicated", loaded["rows"].to_local(), rows)
        check.same(
            "DCP: Shard(1) saved, loaded as Shard(0) (this rank's rows)",
            loaded["cols"].to_local(),
            cols[_rows_of(rank, cols.shape[0], world_size)],
        )
        check.same("DCP: a plain tensor", loaded["replicated"], torch.full((3,), 3.0))
        check.true(f"DCP: a plain value ({loaded['step']})", loaded["step"] == 7)
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(where[0], ignore_errors=True)
    return check.failures


def _rows_of(rank: int, rows: int, world_size: int) -> slice:
    """The rows Shard(0) gives `rank` of a dimension of `rows` (torch.chunk's split)."""
    per = -(-rows // world_size)
    return slice(min(rank * per, rows), min((rank + 1) * per, rows))


def test_distributed_checkpoint_saves_and_reshards(backend_pool):
    assert_no_failures(backend_pool.run(body_distributed_checkpoint, timeout=180))


def _stage_layers(world_size: int) -> list[torch.nn.Module]:
    torch.manual_seed(5)
    return [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(world_size)]


def body_pipelining(rank: int, world_size: int) -> list[str]:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    check = Check(rank)
    microbatches = 4
    g = torch.Generator().manual_seed(17)
    x = torch.randn(8, 8, generator=g)
    target = torch.randn(8, 8, generator=g)

    def loss_fn(out: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(out, tgt)

    # Reference: the whole model in this process, microbatch by microbatch; 1F1B scales each
    # stage's gradient by the number of microbatches.
    whole = torch.nn.Sequential(*_stage_layers(world_size))
    expected_losses = []
    for xs, ts in zip(x.chunk(microbatches), target.chunk(microbatches)):
        loss = loss_fn(whole(xs), ts)
        (loss / microbatches).backward()
        expected_losses.append(loss.detach())
    expected_grads = [p.grad for p in whole[rank].parameters()]

    gloo = dist.new_group(backend="gloo")
    for name, group in (("this backend", None), ("gloo", gloo)):
        layer = _stage_layers(world_size)[rank]
        stage = PipelineStage(layer, rank, world_size, torch.device("cpu"), group=group)
        schedule = Schedule1F1B(stage, n_microbatches=microbatches, loss_fn=loss_fn)
        losses: list[torch.Tensor] = []
        if rank == 0:
            schedule.step(x)
        elif rank == world_size - 1:
            schedule.step(target=target, losses=losses)
        else:
            schedule.step()
        if rank == world_size - 1:
            check.same(
                f"1F1B on {name}: losses", torch.stack(losses), torch.stack(expected_losses), False
            )
        for i, (p, expected) in enumerate(zip(layer.parameters(), expected_grads)):
            check.same(f"1F1B on {name}: stage {rank} gradient {i}", p.grad, expected, False)
    return check.failures


def test_pipeline_schedule_trains_as_on_gloo(backend_pool):
    """torch.distributed.pipelining: stages exchange activations and gradients with batched
    isend/irecv between neighbours, every microbatch."""
    assert_no_failures(backend_pool.run(body_pipelining, timeout=180))


def body_allocate_tensor(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    check.true("supports_tensor_alloc(cpu)", backend.supports_tensor_alloc(torch.device("cpu")))
    check.true(
        "no tensor alloc on cuda:0",
        not backend.supports_tensor_alloc(torch.device("cuda", 0)),
    )
    n = 1 << 18  # 1 MiB of float32: the direct path, reading the tensor where it lies
    before = cpu_memory_of_world()
    t = backend.allocate_tensor(n, dtype=torch.float32, device=torch.device("cpu"))
    check.true(
        f"allocate_tensor's tensor {t.shape} {t.dtype} {t.device}",
        t.shape == (n,) and t.dtype == torch.float32 and t.device.type == "cpu",
    )
    if before is not None:
        after = cpu_memory_of_world()
        check.true(
            f"allocate_tensor took {n * 4} bytes of symmetric memory ({before} -> {after})",
            after["in_use_bytes"] >= before["in_use_bytes"] + n * 4,
        )
    every = inputs(world_size, (n,), torch.float32, 93)
    t.copy_(every[rank])
    dist.all_reduce(t)
    check.same("all_reduce of an allocate_tensor tensor", t, sum(every))
    gathered = backend.allocate_tensor(
        n * world_size, dtype=torch.float32, device=torch.device("cpu")
    )
    dist.all_gather_into_tensor(gathered, every[rank])
    check.same("all_gather into an allocate_tensor tensor", gathered, torch.cat(every))
    for device, size, expected in (
        (torch.device("cuda", 0), 4, "allocate_tensor serves CPU tensors"),
        (torch.device("cpu"), -1, "the size must be non-negative, got -1"),
    ):
        try:
            backend.allocate_tensor(size, dtype=torch.float32, device=device)
            check.true(f"allocate_tensor({size}, {device}) raised", False)
        except RuntimeError as error:
            check.true(f"allocate_tensor({size}, {device}): {error}", expected in str(error))
    return check.failures


def test_allocate_tensor_gives_symmetric_memory(backend_pool):
    assert_no_failures(backend_pool.run(body_allocate_tensor, timeout=120))


# ------------------------------------------------------------------ destroying and aborting groups


def shm_mappings() -> int:
    """How many of this process's mappings are shared-memory segments."""
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if "/dev/shm/" in line)


def body_destroyed_groups_release_their_communicators(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    everyone = list(range(world_size))
    groups_before, mappings_before = len(c10d_func.groups()), shm_mappings()
    every = inputs(world_size, (1 << 14,), torch.float32, 95)
    for round_ in range(4):
        group = dist.new_group(everyone, backend="c10d_func")
        name = group.group_name
        c10d_func.register_group(group, tag=f"destroyed-{round_}")  # bound under a tag too
        t = every[rank].clone()
        dist.all_reduce(t, group=group)
        check.same(f"round {round_}: all_reduce", t, sum(every))
        check.same(
            f"round {round_}: functional all_reduce",
            c10d_func.all_reduce(every[rank], "sum", everyone, tag=f"destroyed-{round_}"),
            sum(every),
        )
        dist.destroy_process_group(group)
        left = [
            g["tag"]
            for g in c10d_func.groups()
            if g["tag"] in (f"ptd:{name}", f"destroyed-{round_}")
        ]
        check.true(f"round {round_}: the destroyed group's communicators left: {left}", not left)
        check.raises(
            f"round {round_}: a call on the destroyed group",
            lambda group=group, t=t: group.allreduce([t]).wait(),
            f"allreduce on process group '{name}' (ranks {everyone}): the group was shut down "
            "(destroy_process_group); create a new group",
        )
    gc.collect()
    check.true(
        f"groups after destroying 4: {len(c10d_func.groups())} (before: {groups_before})",
        len(c10d_func.groups()) == groups_before,
    )
    # Each shm group maps a segment; a destroyed one unmaps it (Gloo groups map none).
    check.true(
        f"shared-memory mappings after destroying 4: {shm_mappings()} (before: {mappings_before})",
        shm_mappings() == mappings_before,
    )
    return check.failures


def test_destroyed_groups_release_their_communicators(backend_pool):
    """destroy_process_group on a c10d_func group drops its communicators from the registry
    (under its tag and any it was bound to), so a program that makes and destroys groups keeps
    no shared memory or threads of them; the destroyed group refuses later calls, naming why."""
    assert_no_failures(backend_pool.run(body_destroyed_groups_release_their_communicators))


def body_abort(rank: int, world_size: int, interrupts: bool) -> list[str]:
    check = Check(rank)
    group = dist.new_group(list(range(world_size)), backend="c10d_func")
    x = torch.ones(1024)
    if rank == 0:
        # In flight when aborted: the peers never take part. On shared memory the abort fails
        # it at once; Gloo has no way to interrupt an operation, so there nothing is in flight.
        work = dist.all_reduce(x, group=group, async_op=True) if interrupts else None
        group.abort()
        if work is not None:
            check.raises(
                "the collective in flight",
                work.wait,
                "the group was aborted (ProcessGroup.abort) on rank 0",
            )
        check.raises(
            "a call after abort",
            lambda: dist.all_reduce(x, group=group),
            "the group was aborted (ProcessGroup.abort); create a new group",
        )
        left = [g for g in c10d_func.groups() if g["tag"] == f"ptd:{group.group_name}"]
        check.true(f"the aborted group's communicators left: {left}", not left)
    dist.barrier()
    dist.destroy_process_group(group)  # after abort too
    if interrupts:
        # On shared memory the abort reaches the host's other members: one that calls the group
        # afterwards fails at once, naming the rank that aborted, instead of at its timeout.
        second = dist.new_group(list(range(world_size)), backend="c10d_func")
        if rank == 0:
            second.abort()
        dist.barrier()
        if rank != 0:
            check.raises(
                "a peer's call after rank 0 aborted",
                lambda: dist.all_reduce(x, group=second),
                "rank 0 failed: the group was aborted (ProcessGroup.abort) on rank 0",
            )
        dist.barrier()
        dist.destroy_process_group(second)
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    check.same("the world still serves", t, torch.full((3,), float(sum(range(world_size)))))
    return check.failures


def test_abort_fails_what_is_in_flight_and_refuses_later_calls(backend_pool):
    interrupts = backend_pool.env.get("C10D_FUNC_CPU_TRANSPORT") != "gloo"
    assert_no_failures(backend_pool.run(body_abort, interrupts, timeout=120))


# ---------------------------------------------------------------------------------- split_group


def body_split(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    half = world_size // 2
    parts = [list(range(half)), list(range(half, world_size))]
    group = c10d_func.split_group(split_ranks=parts, group_desc="halves")
    mine = parts[rank // half]
    check.true(
        f"split group ranks {dist.get_process_group_ranks(group)}",
        dist.get_process_group_ranks(group) == mine,
    )
    check.true("split group's rank", dist.get_rank(group) == mine.index(rank))
    every = inputs(world_size, (6,), torch.float32, 81)
    t = every[rank].clone()
    dist.all_reduce(t, group=group)
    check.same("all_reduce in the subgroup", t, sum(every[r] for r in mine))
    out = torch.empty(6 * half)
    dist.all_gather_into_tensor(out, every[rank], group=group)
    check.same("all_gather in the subgroup", out, torch.cat([every[r] for r in mine]))
    # The functional ops reach the same communicator, by group and by (tag, ranks): no new one.
    created = len([g for g in c10d_func.groups() if g["origin"] == "created"])
    check.same(
        "functional all_reduce on the split group",
        c10d_func.all_reduce(every[rank], "sum", group),
        sum(every[r] for r in mine),
    )
    tag = f"ptd:{group.group_name}"
    check.same(
        "functional all_reduce by tag and ranks",
        c10d_func.all_reduce(every[rank], "sum", mine, tag=tag),
        sum(every[r] for r in mine),
    )
    check.true(
        "no rendezvous for the split group's functional ops",
        len([g for g in c10d_func.groups() if g["origin"] == "created"]) == created,
    )
    # A split that leaves a rank out hands it the non-member sentinel.
    partial = c10d_func.split_group(split_ranks=[[0, 1]])
    if rank < 2:
        t = every[rank].clone()
        dist.all_reduce(t, group=partial)
        check.same("all_reduce in a partial split", t, every[0] + every[1])
    else:
        check.true("non-member gets NON_GROUP_MEMBER", partial == dist.GroupMember.NON_GROUP_MEMBER)
    # A split of a split.
    sub = c10d_func.split_group(group, split_ranks=[[i] for i in range(half)])
    t = every[rank].clone()
    dist.all_reduce(t, group=sub)
    check.same("all_reduce in a split of a split (one member)", t, every[rank])
    return check.failures


def test_split_group(backend_pool):
    assert_no_failures(backend_pool.run(body_split))


def body_groups_share_store_connections(rank: int, world_size: int) -> list[str]:
    """Forming a group's communicators and message channels takes store connections from a
    pool instead of connecting anew (each connect costs the store's server and its client a
    reverse DNS lookup, 5 s where the resolver drops one): 8 groups with a collective and a
    message each open no more connections than one does."""
    import os

    check = Check(rank)
    port = int(os.environ["MASTER_PORT"])
    groups_made = 8

    def make_groups(count: int, salt: int) -> list[Any]:
        made = []
        for i in range(count):
            group = dist.new_group(list(range(world_size)), backend="c10d_func")
            every = inputs(world_size, (4,), torch.float32, salt + i)
            t = every[rank].clone()
            dist.all_reduce(t, group=group)
            check.same(f"all_reduce in new group {salt + i}", t, sum(every))
            message = torch.full((3,), float(rank + i))
            peer = rank ^ 1  # pairs (0, 1), (2, 3)
            if rank % 2 == 0:
                dist.send(message, peer, group=group)
            else:
                received = torch.empty(3)
                dist.recv(received, peer, group=group)
                check.same(
                    f"message in group {salt + i}", received, torch.full((3,), float(peer + i))
                )
            made.append(group)
        return made

    dist.barrier()
    first = make_groups(1, 0)  # the pools' clients exist from here on
    dist.barrier()
    before = store_connections_opened(port)
    dist.barrier()
    many = make_groups(groups_made, 100)
    dist.barrier()
    opened = store_connections_opened(port) - before
    # One per rank at most (a channel forming while another request is in flight takes a
    # second client); connecting per formation opened 2 per group and rank (its communicator
    # and its message channel).
    check.true(
        f"{groups_made} groups on {world_size} ranks opened {opened} store connections",
        opened <= world_size,
    )
    for group in first + many:
        dist.destroy_process_group(group)
    return check.failures


def test_groups_share_store_connections(backend_pool):
    assert_no_failures(backend_pool.run(body_groups_share_store_connections, timeout=120))


def body_split_and_merge_asked_per_device(rank: int, world_size: int) -> list[str]:
    """torch 2.11's ProcessGroup.split_group and merge_remote_group ask the backend of each
    device (cpu, then cuda: one c10d_func backend) in turn, with one store. Asked so here
    (torch 2.14 asks once), the second ask gets the group the first formed, which computes."""
    check = Check(rank)
    parent = dist.new_group(backend="c10d_func")
    backend = parent._get_backend(torch.device("cpu"))
    every = inputs(world_size, (5,), torch.float32, 83)
    half = world_size // 2
    mine = list(range(half)) if rank < half else list(range(half, world_size))
    default = dist.distributed_c10d._get_default_store()
    for round_ in range(2):  # a later split of the same ranks forms a group of its own
        store = dist.PrefixStore(f"per_device_split/{round_}/{mine}", default)
        opts = backend.options
        first = backend.split(store, mine, opts)
        second = backend.split(store, mine, opts)
        check.true(f"round {round_}: the second ask gets the first's group", first is second)
        t = every[rank].clone()
        first.allreduce([t]).wait()
        check.same(f"round {round_}: all_reduce in the split", t, sum(every[r] for r in mine))
        # A member outside the part gets nothing, twice.
        outside = dist.PrefixStore(f"per_device_split/{round_}/outside", default)
        asked = [backend.split(outside, [0], opts) for _ in range(2)]
        check.true(
            f"round {round_}: outside the part: {asked}",
            all((b is None) == (rank != 0) for b in asked) and (rank != 0 or asked[0] is asked[1]),
        )
    store = dist.PrefixStore("per_device_merge/", default)
    merged_rank = store.add("rank", 1) - 1
    first = backend.merge(store, backend.options, merged_rank, world_size)
    second = backend.merge(store, backend.options, merged_rank, world_size)
    check.true("merge: the second ask gets the first's group", first is second)
    t = torch.full((3,), float(merged_rank + 1))
    first.allreduce([t]).wait()
    check.same(
        "all_reduce in the merged group", t, torch.full((3,), world_size * (world_size + 1) / 2)
    )
    return check.failures


def test_split_and_merge_asked_per_device(backend_pool):
    assert_no_failures(backend_pool.run(body_split_and_merge_asked_per_device))


def body_split_errors(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    for bad, needle in [
        ([[0, 0]], "twice"),
        ([[0, world_size]], "not a rank"),
        ([], "non-empty"),
        ([[0], [0, 1]], "twice"),
    ]:
        try:
            c10d_func.split_group(split_ranks=bad)
            check.true(f"split_group({bad}) should raise", False)
        except ValueError as error:
            check.true(f"split_group({bad}): {error}", needle in str(error))
    return check.failures


def test_split_group_rejects_bad_splits(backend_pool):
    assert_no_failures(backend_pool.run(body_split_errors))


def test_backend_is_registered_on_import():
    assert "C10D_FUNC" in dist.Backend._plugins
    assert dist.Backend("c10d_func") == "c10d_func"
