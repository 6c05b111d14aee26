"""Backend parity: a program written for Gloo behaves the same on backend "c10d_func".

Every row of the Backend API table runs in the same test, on the same ranks, against a Gloo group
and a c10d_func group, with the same assertions: values (each compared with a reference built
from every rank's known input), errors (the same exception type, and torch's phrase in both
messages), timeouts (the group's, set_timeout's and a call's own: a missing member fails the call
on both within its timeout), sparse all_reduce and DDP with sparse gradients, split and merge,
monitored_barrier. What c10d_func adds (naming the missing rank) is asserted on top, for it
alone. Documented differences (docs/compatibility.md) are not rows here.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Iterator
from typing import Any

import c10d_func
import pytest
import torch
import torch.distributed as dist
from error_text import reports_timeout
from reference import make_input
from test_backend import Check, _opts
from test_collectives import assert_no_failures
from worker_pool import WorkerPool

GROUP_TIMEOUT = datetime.timedelta(seconds=60)
SHORT = datetime.timedelta(seconds=2)


def setup_parity_world(rank: int, world_size: int) -> None:
    dist.init_process_group("c10d_func", rank=rank, world_size=world_size, timeout=GROUP_TIMEOUT)


# c10d_func's side runs on each CPU transport a group on one host can have: shared memory (the
# default) and Gloo (C10D_FUNC_CPU_TRANSPORT=gloo, what a group spanning hosts with one member
# per host runs on).
TRANSPORTS = ["shm", "gloo"]
# torch 2.11 has only the private form, which reaches c10d_func's backends through c10d_func's
# patch as it reaches Gloo's.
set_timeout = getattr(dist, "set_timeout", dist.distributed_c10d._set_pg_timeout)
# What c10d_func refuses on purpose where torch 2.11's Gloo accepts it (docs/compatibility.md,
# "On torch 2.11"): 2.14's Gloo refuses it as c10d_func does.
REFUSED_WHERE_OLDER_GLOO_ACCEPTS = {"alltoall_base dim 0 not divisible"}


@pytest.fixture(
    scope="module",
    params=[(t, n) for t in TRANSPORTS for n in (2, 4)],
    ids=[f"{t}-ws{n}" for t in TRANSPORTS for n in (2, 4)],
)
def parity_pool(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    transport, world_size = request.param
    env = {
        "C10D_FUNC_TEST_SETUP": "test_backend_parity:setup_parity_world",
        "C10D_FUNC_CPU_TRANSPORT": transport,
    }
    pool = WorkerPool(world_size, env=env)
    yield pool
    pool.close()


def both_groups(timeout: datetime.timedelta = GROUP_TIMEOUT) -> dict[str, dist.ProcessGroup]:
    """A fresh group of every rank on each backend (every rank calls this)."""
    return {
        "gloo": dist.new_group(backend="gloo", timeout=timeout),
        "c10d_func": dist.new_group(backend="c10d_func", timeout=timeout),
    }


def cpu_backend(group: dist.ProcessGroup) -> Any:
    return group._get_backend(torch.device("cpu"))


def outcome(fn: Callable[[], Any]) -> tuple[str, str]:
    """('ok', '') or (exception type name, message) of running `fn` (a call and its wait)."""
    try:
        work = fn()
        if work is not None and hasattr(work, "wait"):
            work.wait()
        return "ok", ""
    except Exception as error:  # noqa: BLE001 - the type is what is compared
        return type(error).__name__, str(error)


# ------------------------------------------------------------------------------ argument checks


def error_rows(rank: int, world_size: int) -> list[tuple[str, Callable[[Any], Any], str]]:
    """(row, call on a backend, torch's phrase): each call is refused on every rank."""
    ws = world_size
    peer = (rank + 1) % ws
    one = torch.ones(2)
    floats = [torch.ones(2) for _ in range(ws)]
    return [
        ("broadcast root rank past the group", lambda b: b.broadcast([one.clone()], _opts("BroadcastOptions", rootRank=ws)), f"invalid root rank: {ws}"),
        ("broadcast negative root rank", lambda b: b.broadcast([one.clone()], _opts("BroadcastOptions", rootRank=-1)), "invalid root rank: -1"),
        ("broadcast root tensor 1 of one", lambda b: b.broadcast([one.clone()], _opts("BroadcastOptions", rootTensor=1)), "invalid root tensor: 1"),
        ("reduce root tensor -1", lambda b: b.reduce([one.clone()], _opts("ReduceOptions", rootTensor=-1)), "invalid root tensor: -1"),
        ("reduce root rank past the group", lambda b: b.reduce([one.clone()], _opts("ReduceOptions", rootRank=ws)), f"invalid root rank: {ws}"),
        ("reduce two tensors", lambda b: b.reduce([one.clone(), one.clone()], _opts("ReduceOptions")), "requires a single-element tensor list"),
        ("allreduce of no tensor", lambda b: b.allreduce([], _opts("AllreduceOptions")), "requires non-empty tensor list"),
        ("allreduce BAND of floats", lambda b: b.allreduce([one.clone()], _opts("AllreduceOptions", reduceOp=dist.ReduceOp.BAND)), "Cannot use ReduceOp.BAND with non-integral dtype"),
        ("allreduce_coalesced of no tensor", lambda b: b.allreduce_coalesced([], _opts("AllreduceCoalescedOptions")), "requires non-empty tensor list"),
        ("sparse allreduce MAX", lambda b: b.allreduce([torch.eye(3).to_sparse()], _opts("AllreduceOptions", reduceOp=dist.ReduceOp.MAX)), "unsupported reduction operation (allreduce of sparse tensors only works with ReduceOp.SUM)"),
        ("allgather output lists of another length", lambda b: b.allgather([[torch.empty(2) for _ in range(ws)]] * 2, [one], _opts("AllgatherOptions")), "requires input/output tensor lists to have the same length"),
        ("allgather one output too many", lambda b: b.allgather([[torch.empty(2) for _ in range(ws + 1)]], [one], _opts("AllgatherOptions")), f"invalid output tensor list at index 0 (expected length {ws}, got {ws + 1})"),
        ("allgather output of another dtype", lambda b: b.allgather([[torch.empty(2, dtype=torch.int32) for _ in range(ws)]], [one], _opts("AllgatherOptions")), "invalid tensor type at index 0"),
        ("allgather output of another size", lambda b: b.allgather([[torch.empty(3) for _ in range(ws)]], [one], _opts("AllgatherOptions")), "invalid tensor size at index 0"),
        ("allgather of no input", lambda b: b.allgather([], [], _opts("AllgatherOptions")), "requires non-empty input tensor list"),
        ("allgather_coalesced output lists not one per rank", lambda b: b.allgather_coalesced([[torch.empty(2)]] * (ws + 1), [one], _opts("AllgatherOptions")), "output lists should be equal to world size"),
        ("gather root rank past the group", lambda b: b.gather([], [one], _opts("GatherOptions", rootRank=ws)), f"invalid root rank: {ws}"),
        ("gather two inputs", lambda b: b.gather([], [one, one], _opts("GatherOptions", rootRank=0)), "requires a single-element input tensor list"),
        ("gather wrong output list size on the root",
         lambda b: b.gather([floats[:-1]] if rank == 0 else [], [one], _opts("GatherOptions", rootRank=0)),
         "Incorrect output list size" if rank == 0 else "__ok__"),
        ("gather outputs on a non-root",
         lambda b: b.gather([floats] if rank == 1 else ([floats] if rank == 0 else []), [one], _opts("GatherOptions", rootRank=0)),
         "requires empty output on non-root" if rank == 1 else "__ok__"),
        ("scatter negative root rank", lambda b: b.scatter([one.clone()], [], _opts("ScatterOptions", rootRank=-1)), "invalid root rank: -1"),
        ("scatter two outputs", lambda b: b.scatter([one.clone(), one.clone()], [], _opts("ScatterOptions", rootRank=0)), "requires a single-element output tensor list"),
        ("scatter wrong input list size on the root",
         lambda b: b.scatter([one.clone()], [floats[:-1]] if rank == 0 else [], _opts("ScatterOptions", rootRank=0)),
         "Incorrect input list size" if rank == 0 else "__ok__"),
        ("scatter inputs on a non-root",
         lambda b: b.scatter([one.clone()], [floats] if rank in (0, 1) else [], _opts("ScatterOptions", rootRank=0)),
         "requires empty input on non-root" if rank == 1 else "__ok__"),
        ("reduce_scatter input list not one per rank", lambda b: b.reduce_scatter([torch.empty(2)], [floats[:-1]], _opts("ReduceScatterOptions")), "invalid input tensor list size, must be world size"),
        ("alltoall_base splits not one per rank", lambda b: b.alltoall_base(torch.empty(ws), torch.ones(ws), [], [1] * (ws + 1), _opts("AllToAllOptions")), "Number of tensor splits not equal to group size"),
        ("alltoall_base splits not summing to dim 0", lambda b: b.alltoall_base(torch.empty(ws), torch.ones(ws), [], [ws] + [1] * (ws - 1), _opts("AllToAllOptions")), "Split sizes doesn't match total dim 0 size"),
        ("alltoall_base dim 0 not divisible", lambda b: b.alltoall_base(torch.empty(ws + 1), torch.ones(ws + 1), [], [], _opts("AllToAllOptions")), "Tensor's dim 0 does not divide equally across group size"),
        ("alltoall output list not one per rank", lambda b: b.alltoall([torch.empty(1)] * (ws + 1), [one] * ws, _opts("AllToAllOptions")), f"output tensor list size {ws + 1} does not match world size {ws}"),
        ("alltoall input list not one per rank", lambda b: b.alltoall([torch.empty(2)] * ws, [one] * (ws - 1), _opts("AllToAllOptions")), f"input tensor list size {ws - 1} does not match world size {ws}"),
        ("send of two tensors", lambda b: b.send([one, one], peer, 0), "takes a single tensor"),
        ("send with a negative tag", lambda b: b.send([one], peer, -1), "Tag must be nonnegative"),
    ]  # fmt: skip


def body_errors(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    groups = both_groups()
    for row, call, phrase in error_rows(rank, world_size):
        if phrase == "__ok__":
            continue  # this rank's part is valid (a peer's is not): issuing it would dangle
        seen = {name: outcome(lambda: call(cpu_backend(g))) for name, g in groups.items()}
        (gloo_type, gloo_text), (ours_type, ours_text) = seen["gloo"], seen["c10d_func"]
        if gloo_type == "ok" and row in REFUSED_WHERE_OLDER_GLOO_ACCEPTS:
            # An older Gloo accepted it: c10d_func still refuses, in 2.14's Gloo's words.
            check.true(f"{row}: c10d_func refuses ({ours_type})", ours_type == "RuntimeError")
            check.true(
                f"{row}: c10d_func's lacks {phrase!r}: {ours_text[:300]}", phrase in ours_text
            )
            continue
        check.true(f"{row}: Gloo raises ({gloo_type}: {gloo_text[:200]})", gloo_type != "ok")
        check.true(
            f"{row}: same exception type (gloo {gloo_type}, c10d_func {ours_type}: {ours_text})",
            ours_type == gloo_type,
        )
        for name, text in (("gloo", gloo_text), ("c10d_func", ours_text)):
            check.true(f"{row}: {name}'s message lacks {phrase!r}: {text[:300]}", phrase in text)
    # Neither group was left half-issued: both still reduce.
    every = [make_input(r, (3,), torch.float32, 5) for r in range(world_size)]
    for name, group in groups.items():
        t = every[rank].clone()
        dist.all_reduce(t, group=group)
        check.same(f"all_reduce on {name} after the refusals", t, sum(every))
    return check.failures


def test_argument_checks_raise_as_gloo_does(parity_pool):
    assert_no_failures(parity_pool.run(body_errors))


# ---------------------------------------------------------------------- all_to_all_single shapes


def body_all_to_all_shapes(rank: int, world_size: int) -> list[str]:
    # Gloo counts an all_to_all_single's split sizes in each tensor's own rows, so input and
    # output may have rows of other shapes with the same elements: a flat output for a [2 n, 3]
    # input, a complex input (which torch views as [n, 2]) beside a real output, and an empty
    # 1-D output on a member that receives nothing while its input is [k, 4]. Both backends
    # must run them and give the reference.
    check = Check(rank)
    groups = both_groups()
    ws = world_size
    x = make_input(rank, (2 * ws, 3), torch.float32, 21)
    flat_expected = torch.cat(
        [
            make_input(j, (2 * ws, 3), torch.float32, 21).flatten()[6 * rank : 6 * rank + 6]
            for j in range(ws)
        ]
    )
    z = torch.complex(
        make_input(rank, (ws,), torch.float32, 22), make_input(rank, (ws,), torch.float32, 23)
    )
    complex_expected = torch.cat(
        [
            torch.view_as_real(
                torch.complex(
                    make_input(j, (ws,), torch.float32, 22), make_input(j, (ws,), torch.float32, 23)
                )
            ).flatten()[2 * rank : 2 * rank + 2]
            for j in range(ws)
        ]
    )
    # Every member sends one row to every member but rank 0, which receives nothing.
    rows = [0] + [1] * (ws - 1)
    y = make_input(rank, (ws - 1, 4), torch.float32, 24)
    empty_expected = (
        torch.empty(0)
        if rank == 0
        else torch.stack(
            [make_input(j, (ws - 1, 4), torch.float32, 24)[rank - 1] for j in range(ws)]
        )
    )
    for name, group in groups.items():
        out = torch.empty(6 * ws)
        dist.all_to_all_single(out, x, group=group)
        check.same(f"{name}: [2 n, 3] into a flat output", out, flat_expected)
        out = torch.empty(2 * ws)
        dist.all_to_all_single(out, z, group=group)
        check.same(f"{name}: complex input into a real output", out, complex_expected)
        out = torch.empty(0) if rank == 0 else torch.empty(ws, 4)
        dist.all_to_all_single(out, y, [0] * ws if rank == 0 else [1] * ws, rows, group=group)
        check.same(f"{name}: an empty 1-D output where nothing is received", out, empty_expected)
    return check.failures


def test_all_to_all_single_with_rows_of_other_shapes_as_on_gloo(parity_pool):
    assert_no_failures(parity_pool.run(body_all_to_all_shapes))


def test_all_to_all_single_of_one_member_refuses_elements_that_differ():
    # A group of one (c10d_func's local copy) sends itself what it expects from itself, as
    # Gloo enforces: an output of other elements than the input raises (before, with rows of
    # other shapes allowed, an empty input left a 3-element output unwritten, no error).
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ours = dist.new_group(backend="c10d_func")
        for group in (None, ours):
            for out, x in ((torch.empty(3), torch.empty(0, 4)), (torch.empty(5), torch.ones(2, 3))):
                with pytest.raises((RuntimeError, ValueError)):
                    dist.all_to_all_single(out, x, group=group)
            out = torch.empty(6)
            dist.all_to_all_single(out, torch.arange(6.0).view(2, 3), group=group)
            assert torch.equal(out, torch.arange(6.0)), out
    finally:
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------- sparse

SPARSE_DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.int8, torch.uint8]
# Gloo fails these past two members (torch's sparse add has no Half kernel: "cadd_sparse" not
# implemented for 'Half'); c10d_func sums them (docs/compatibility.md), checked on it alone.
SPARSE_DTYPES_BEYOND_GLOO = [torch.float16, torch.bfloat16]


def sparse_input(rank: int, dtype: torch.dtype, salt: int, dense_dims: int = 0) -> torch.Tensor:
    """Rank r's sparse tensor of shape (6, 4[, 3]): entries on rows r..r+2 and one shared row,
    built uncoalesced (a repeated index) to exercise coalescing; rank 1 has none at all."""
    shape = (6, 4) + ((3,) * dense_dims)
    if rank == 1:
        return torch.sparse_coo_tensor(
            torch.zeros(2, 0, dtype=torch.long),
            torch.zeros((0,) + shape[2:], dtype=dtype),
            shape,
            check_invariants=True,
        )
    rows = [rank % 6, (rank + 1) % 6, (rank + 2) % 6, 5, 5]
    cols = [(rank + salt) % 4, salt % 4, (rank * 3) % 4, 0, 0]
    g = torch.Generator().manual_seed(1000 * salt + rank)
    values = torch.randint(1, 5, (5,) + shape[2:], generator=g).to(dtype)
    return torch.sparse_coo_tensor(torch.tensor([rows, cols]), values, shape, check_invariants=True)  # fmt: skip


def body_sparse(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    groups = both_groups()
    for salt, dtype in enumerate(SPARSE_DTYPES + SPARSE_DTYPES_BEYOND_GLOO):
        for dense_dims in (0, 1):
            every = [sparse_input(r, dtype, salt, dense_dims) for r in range(world_size)]
            expected = sum(e.to_dense().to(torch.float64) for e in every).to(dtype)
            for name, group in groups.items():
                if name == "gloo" and dtype in SPARSE_DTYPES_BEYOND_GLOO:
                    continue
                t = every[rank].clone()
                work = dist.all_reduce(t, group=group, async_op=True)
                result = work.get_future().wait()[0]
                what = f"sparse all_reduce {dtype} dense_dims={dense_dims} on {name}"
                check.true(f"{what}: stays sparse", t.is_sparse and result.is_sparse)
                check.true(f"{what}: coalesced", t.is_coalesced())
                check.same(what, t.to_dense(), expected)
                check.same(f"{what}: future value", result.to_dense(), expected)
    # Nothing anywhere.
    for name, group in groups.items():
        t = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long), torch.zeros(0), (5,))
        dist.all_reduce(t, group=group)
        check.same(f"empty sparse all_reduce on {name}", t.to_dense(), torch.zeros(5))
    return check.failures


def test_sparse_all_reduce_as_gloo(parity_pool):
    assert_no_failures(parity_pool.run(body_sparse))


def _sparse_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(20, 6, sparse=True)
            self.bag = torch.nn.EmbeddingBag(16, 6, mode="sum", sparse=True)
            self.head = torch.nn.Linear(6, 2)

        def forward(self, ids: torch.Tensor, bag_ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.embedding(ids).mean(1) + self.bag(bag_ids))

    return Model()


def body_ddp_sparse(rank: int, world_size: int) -> list[str]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    check = Check(rank)
    trained = {}
    for name, group in both_groups().items():
        model = DDP(_sparse_model(rank), process_group=group)  # rank 0's weights are broadcast
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        for step in range(4):
            g = torch.Generator().manual_seed(100 * step + rank)
            ids = torch.randint(0, 20, (5, 3), generator=g)
            bag_ids = torch.randint(0, 16, (5, 4), generator=g)
            target = torch.randn(5, 2, generator=g)
            loss = torch.nn.functional.mse_loss(model(ids, bag_ids), target)
            opt.zero_grad()
            loss.backward()
            check.true(
                f"{name}: embedding gradient is sparse",
                model.module.embedding.weight.grad.is_sparse,
            )
            opt.step()
        trained[name] = [p.detach().clone() for p in model.parameters()]
    for i, (ours, gloo) in enumerate(zip(trained["c10d_func"], trained["gloo"])):
        check.same(f"DDP with sparse gradients: parameter {i} as on Gloo", ours, gloo, exact=False)
    return check.failures


def test_ddp_with_sparse_gradients_as_on_gloo(parity_pool):
    assert_no_failures(parity_pool.run(body_ddp_sparse, timeout=240))


# ------------------------------------------------------------------------------------ timeouts


def body_options_and_set_timeout(rank: int, world_size: int) -> list[str]:
    from torch._C._distributed_c10d import Backend as C10dBackend

    check = Check(rank)
    for name, group in both_groups(SHORT).items():
        options = cpu_backend(group).options
        check.true(
            f"{name}: options is a Backend.Options", isinstance(options, C10dBackend.Options)
        )
        check.true(f"{name}: options name the backend ({options.backend})", options.backend == name)
        check.true(
            f"{name}: options carry the group's timeout ({options._timeout})",
            options._timeout == SHORT,
        )
        set_timeout(datetime.timedelta(seconds=7), group)
        check.true(
            f"{name}: set_timeout reaches the options ({cpu_backend(group).options._timeout})",
            cpu_backend(group).options._timeout == datetime.timedelta(seconds=7),
        )
    ours = cpu_backend(dist.group.WORLD).options
    transport = os.environ["C10D_FUNC_CPU_TRANSPORT"]
    check.true(
        f"c10d_func's options name the transport ({ours.transport})",
        ours.transport == f"cpu:{transport}",
    )
    check.true(
        f"c10d_func's options list the global ranks ({ours.global_ranks_in_group})",
        list(ours.global_ranks_in_group) == list(range(world_size)),
    )
    return check.failures  # fmt: skip


def test_options_and_set_timeout(parity_pool):
    assert_no_failures(parity_pool.run(body_options_and_set_timeout))


def _alone(
    rank: int,
    groups: dict[str, dist.ProcessGroup],
    call: Callable[[dist.ProcessGroup], Any],
    limit_s: float,
    check: Check,
    what: str,
) -> None:
    """Rank 0 alone calls `call` on each group: it must fail on both, and each error must say it
    waited for `limit_s` (the timeout that applies; no clock is read: the tests pass on a machine
    of any speed); c10d_func's error names a missing rank."""
    if rank != 0:
        return
    for name, group in groups.items():
        kind, text = outcome(lambda: call(group))
        check.true(f"{what} on {name}: raises ({kind})", kind != "ok")
        check.true(
            f"{what} on {name}: the error reports the {limit_s} s timeout: {text}",
            reports_timeout(text, limit_s),
        )
        if name == "c10d_func":
            check.true(f"{what}: names the op and a missing rank: {text}",
                       ("allreduce" in text or "all_reduce" in text) and any(f"rank {r}" in text or f"ranks [{r}" in text for r in range(1, 64)))  # fmt: skip


def _sync() -> None:
    """Every rank waits here for rank 0's lone calls to be over (the world is a healthy group)."""
    dist.barrier()


def body_timeouts(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    # The group's timeout, from new_group.
    groups = both_groups(SHORT)
    _alone(
        rank, groups, lambda g: dist.all_reduce(torch.ones(4), group=g), 2.0, check, "group timeout"
    )
    _sync()
    # set_timeout shortens a long one for the calls after it.
    groups = both_groups(GROUP_TIMEOUT)
    for group in groups.values():
        set_timeout(SHORT, group)
    _alone(
        rank, groups, lambda g: dist.all_reduce(torch.ones(4), group=g), 2.0, check, "set_timeout"
    )
    _sync()
    # A call's own Options.timeout bounds that call alone.
    groups = both_groups(GROUP_TIMEOUT)
    opts = _opts("AllreduceOptions", timeout=datetime.timedelta(milliseconds=1500))
    _alone(
        rank,
        groups,
        lambda g: cpu_backend(g).allreduce([torch.ones(4)], opts),
        1.5,
        check,
        "AllreduceOptions.timeout",
    )
    _sync()
    return check.failures  # fmt: skip


def test_timeouts_as_torch_defines_them(parity_pool):
    assert_no_failures(parity_pool.run(body_timeouts, timeout=120))


def body_message_timeouts(rank: int, world_size: int) -> list[str]:
    # c10d_func alone: Gloo's recv keeps the timeout its group was made with (set_timeout does
    # not reach its buffers; docs/compatibility.md), so there is no Gloo behaviour to match.
    check = Check(rank)
    group = dist.new_group(backend="c10d_func", timeout=GROUP_TIMEOUT)
    # One message forms the channel from rank 1 to rank 0 under the long timeout ...
    if rank == 1:
        dist.send(torch.ones(2), 0, group=group)
    elif rank == 0:
        dist.recv(torch.empty(2), 1, group=group)
    # ... which set_timeout shortens for the messages after it.
    set_timeout(SHORT, group)
    if rank == 0:
        kind, text = outcome(lambda: dist.recv(torch.empty(2), 1, group=group))
        check.true(f"recv with no sender: raises ({kind})", kind != "ok")
        check.true(
            f"recv with no sender: reports the 2 s timeout: {text}", reports_timeout(text, 2.0)
        )
        check.true(f"recv names the sender: {text}", "rank 1" in text)
    _sync()
    return check.failures  # fmt: skip


def test_message_timeouts_follow_set_timeout(parity_pool):
    assert_no_failures(parity_pool.run(body_message_timeouts, timeout=120))


# ---------------------------------------------------------------------------- monitored_barrier


def body_monitored_barrier(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    # With everyone there, the group's long timeout: 4 ranks on 2 cores may arrive seconds
    # apart, and the members that arrive first wait the group's timeout for rank 0's release.
    for name, group in both_groups().items():
        kind, text = outcome(lambda: dist.monitored_barrier(group, timeout=GROUP_TIMEOUT))
        check.true(f"monitored_barrier with everyone on {name}: {kind} {text[:200]}", kind == "ok")
    for wait_all in (False, True):
        # The last rank (or, with wait_all_ranks, the upper half) never arrives.
        missing = list(range(world_size // 2, world_size)) if wait_all else [world_size - 1]
        for name, group in both_groups(SHORT).items():
            if rank in missing:
                continue
            kind, text = outcome(
                lambda: dist.monitored_barrier(group, timeout=SHORT, wait_all_ranks=wait_all)
            )
            what = f"monitored_barrier(wait_all_ranks={wait_all}) on {name}, rank {rank}"
            if rank == 0:
                phrase = (
                    f"Ranks {', '.join(map(str, missing))} failed to pass monitoredBarrier in 2000 ms"
                    if wait_all
                    else f"Rank {missing[0]} failed to pass monitoredBarrier in 2000 ms"
                )
            else:
                phrase = f"Rank {rank} successfully reached monitoredBarrier, but received errors"
            check.true(f"{what}: RuntimeError ({kind})", kind == "RuntimeError")
            check.true(f"{what}: lacks {phrase!r}: {text[:300]}", phrase in text)
        _sync()
    # A timeout of 0 (torch's own test of Gloo): rank 0, alone in the barrier, times out at once.
    for name, group in both_groups(SHORT).items():
        if rank == 0:
            kind, text = outcome(lambda: group.monitored_barrier(datetime.timedelta(seconds=0)))
            phrase = "Rank 0 timed out in monitoredBarrier after 0 ms"
            check.true(f"zero timeout on {name}: RuntimeError ({kind})", kind == "RuntimeError")
            check.true(f"zero timeout on {name}: lacks {phrase!r}: {text[:300]}", phrase in text)
        _sync()
    return check.failures  # fmt: skip


def test_monitored_barrier_as_on_gloo(parity_pool):
    assert_no_failures(parity_pool.run(body_monitored_barrier, timeout=120))


# --------------------------------------------------------------- TORCH_DISTRIBUTED_DEBUG=DETAIL


def body_detail_debug_level(rank: int, world_size: int) -> list[str]:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every new group's backend in torch's
    ProcessGroupWrapper, which compares each collective's fingerprint (with the backend's
    sequence number) across the members before running it."""
    check = Check(rank)
    every = [make_input(r, (6,), torch.float32, 43) for r in range(world_size)]
    before = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        groups = both_groups()
        for name, group in groups.items():
            check.true(
                f"{name} is wrapped: {type(cpu_backend(group)).__name__}",
                type(cpu_backend(group)).__name__ == "_ProcessGroupWrapper",
            )
            for step in range(3):
                t = every[rank].clone()
                dist.all_reduce(t, group=group)
                check.same(f"all_reduce {step} on wrapped {name}", t, sum(every))
            gathered = [torch.empty(6) for _ in range(world_size)]
            dist.all_gather(gathered, every[rank], group=group)
            check.same(f"all_gather on wrapped {name}", torch.stack(gathered), torch.stack(every))
            # Read through the backend (the wrapper forwards it): torch 2.11's ProcessGroup
            # answers it for its own backends only.
            sequence = cpu_backend(group)._get_sequence_number_for_group()
            check.true(
                f"{name}'s sequence number counts its 4 collectives: {sequence}", sequence == 4
            )
            # The functional API on the wrapped group: a c10d_func group's own communicators
            # serve it, as without DETAIL; Gloo is called through torch's wrapper, as torch's
            # functional collectives call it.
            out = c10d_func.wait_tensor(c10d_func.all_reduce(every[rank], "sum", group))
            check.same(f"functional all_reduce on wrapped {name}", out, sum(every))
            served = [
                g["backend"]
                for g in c10d_func.groups()
                if g["tag"] == f"ptd:{group.group_name}" and g["device"] == "cpu"
            ]
            if name == "c10d_func":
                check.true(
                    f"the wrapped c10d_func group's communicators serve it: {served}",
                    served and "c10d_func" not in served,
                )
            # A split of the wrapped group computes (on CUDA it splits the communicators of the
            # c10d_func backend inside the wrapper).
            parts = [[r for r in range(world_size) if r % 2 == c] for c in (0, 1)]
            child = c10d_func.split_group(group, parts)
            t = every[rank].clone()
            dist.all_reduce(t, group=child)
            check.same(
                f"all_reduce in a split of wrapped {name}",
                t,
                sum(every[r] for r in parts[rank % 2]),
            )
        # Members in different collectives: the wrapper names the mismatch on every member,
        # before the collective runs.
        for name, group in both_groups().items():
            t = torch.ones(2)
            kind, text = outcome(
                lambda: (
                    dist.all_reduce(t, group=group)
                    if rank == 0
                    else dist.broadcast(t, 0, group=group)
                )
            )
            phrase = "Detected mismatch between collectives on ranks"
            check.true(f"mismatch on {name}: RuntimeError ({kind})", kind == "RuntimeError")
            check.true(f"mismatch on {name}: lacks {phrase!r}: {text[:300]}", phrase in text)
    finally:
        dist.set_debug_level(before)
    _sync()
    return check.failures


def test_detail_debug_level_as_on_gloo(parity_pool):
    assert_no_failures(parity_pool.run(body_detail_debug_level, timeout=120))


# ---------------------------------------------------------------------------- split and merge


def groups_to_split_and_merge(world_size: int) -> dict[str, dist.ProcessGroup]:
    """both_groups(), but for torch 2.11's Gloo at more than 2 ranks: its own split_group and
    merge_remote_group hang there in about half the runs (a member's all_reduce in the new group
    times out; reproduced with Gloo alone, no c10d_func imported; 2.14's passed every run), so
    there c10d_func's group is checked alone, against the sums the checks compute."""
    groups = both_groups()
    if world_size > 2 and torch.torch_version.TorchVersion(torch.__version__) < (2, 14):
        del groups["gloo"]
    return groups


def body_split_and_merge(rank: int, world_size: int) -> list[str]:
    check = Check(rank)
    half = world_size // 2
    parts = [list(range(half)), list(range(half, world_size))]
    mine = parts[rank // half]
    every = [make_input(r, (5,), torch.float32, 41) for r in range(world_size)]
    for name, parent in groups_to_split_and_merge(world_size).items():
        check.true(f"{name} supports splitting", cpu_backend(parent).supports_splitting)
        child = parent.split_group(mine, timeout=GROUP_TIMEOUT)
        check.true(
            f"{name}: split member of {mine} has size {child.size()}", child.size() == len(mine)
        )
        check.true(f"{name}: split rank", child.rank() == mine.index(rank))
        t = every[rank].clone()
        child.allreduce([t]).wait()
        check.same(f"all_reduce in a split of {name}", t, sum(every[r] for r in mine))
        # A member outside a split gets nothing.
        outside = parent.split_group([0], timeout=GROUP_TIMEOUT)
        check.true(
            f"{name}: non-member of a split gets None ({outside})", (outside is None) == (rank != 0)
        )
    # merge_remote_group: every rank joins one merged group through a store of its own, from
    # parents of their own.
    for name, parent in groups_to_split_and_merge(world_size).items():
        store = dist.PrefixStore(f"merge/{name}/", dist.distributed_c10d._get_default_store())
        merged = parent.merge_remote_group(store, world_size, GROUP_TIMEOUT)
        t = torch.full((3,), float(merged.rank() + 1))
        merged.allreduce([t]).wait()
        check.same(
            f"all_reduce in a merged group of {name}",
            t,
            torch.full((3,), world_size * (world_size + 1) / 2),
        )
    return check.failures  # fmt: skip


def test_split_and_merge_as_on_gloo(parity_pool):
    assert_no_failures(parity_pool.run(body_split_and_merge))
