"""Every operator on CPU between real processes over Gloo, 2 and 4 ranks, checked against
references computed independently from every member's known input.

Each test sends one rank-side function to the pool; it runs the op over every dtype (and every
reduce op it allows) and every group layout, and returns the list of mismatches (empty = pass).
Every call also checks that the input is unchanged and that the output is a fresh tensor.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from reference import (
    MOVE_DTYPES,
    REDUCE_DTYPES,
    REDUCE_OPS,
    bits,
    make_input,
    mismatch,
    reduce_allowed,
    reduce_reference,
)

ops = torch.ops.c10d_func if hasattr(torch.ops, "c10d_func") else None

# (ranks, group_size) layouts per world size: the whole world, several chunks, reordered chunks,
# and groups of one.
LAYOUTS = {
    2: [([0, 1], 2), ([1, 0], 2), ([0, 1], 1)],
    4: [([0, 1, 2, 3], 4), ([0, 1, 2, 3], 2), ([3, 1, 2, 0], 2), ([0, 1, 2, 3], 1)],
}


class Checks:
    """Collects mismatches on one rank instead of stopping at the first."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.failures: list[str] = []

    def expect(
        self, what: str, out: torch.Tensor, expected: torch.Tensor, exact: bool = False
    ) -> None:
        problem = mismatch(out, expected, exact)
        if problem:
            self.failures.append(f"rank {self.rank}: {what}: {problem}")

    def functional(
        self, what: str, fn: Callable[..., torch.Tensor], x: torch.Tensor, *args
    ) -> torch.Tensor:
        """Calls a non-mutating op, waits, and checks input untouched and output not aliasing."""
        before = x.clone()
        out = torch.ops.c10d_func.wait_tensor(fn(x, *args))
        if not torch.equal(bits(x), bits(before)):
            self.failures.append(f"rank {self.rank}: {what}: the input was modified")
        if (
            out.numel()
            and x.numel()
            and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        ):
            self.failures.append(f"rank {self.rank}: {what}: the output aliases the input")
        if not out.is_contiguous():
            self.failures.append(f"rank {self.rank}: {what}: the output is not contiguous")
        return out


def chunk_of(rank: int, ranks: list[int], group_size: int) -> tuple[list[int], int]:
    position = ranks.index(rank)
    first = position // group_size * group_size
    members = ranks[first : first + group_size]
    return members, position - first


def layouts(world_size: int):
    yield from LAYOUTS[world_size]


# ---------------------------------------------------------------- rank-side bodies (run in workers)


def body_all_reduce(rank: int, world_size: int, inplace: bool) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, _ = chunk_of(rank, ranks, gs)
        for salt, dtype in enumerate(REDUCE_DTYPES):
            for op in REDUCE_OPS:
                if not reduce_allowed(op, dtype):
                    continue
                for shape in [(5, 3), (0, 2), ()]:
                    x = make_input(rank, shape, dtype, salt)
                    expected = reduce_reference(
                        [make_input(m, shape, dtype, salt) for m in members], op
                    )
                    what = f"all_reduce{'_' if inplace else ''} {op} {dtype} {shape} ranks={ranks} gs={gs}"
                    if inplace:
                        # The custom-op mutation convention: x is written, nothing returned.
                        if ops.all_reduce_(x, op, "", ranks, gs) is not None:
                            checks.failures.append(f"{what}: all_reduce_ returned a value")
                        checks.expect(what, ops.wait_tensor(x), expected)
                    else:
                        out = checks.functional(what, ops.all_reduce, x, op, "", ranks, gs)
                        checks.expect(what, out, expected)
        # A non-contiguous input is read correctly (functional and in place).
        base = make_input(rank, (4, 6), torch.float32, 99)
        expected = reduce_reference(
            [make_input(m, (4, 6), torch.float32, 99).t() for m in members], "sum"
        )
        if inplace:
            view = base.t()
            ops.all_reduce_(view, "sum", "", ranks, gs)
            ops.wait_tensor(view)
            checks.expect(f"all_reduce_ non-contiguous gs={gs}", view, expected)
        else:
            out = checks.functional(
                "all_reduce non-contiguous", ops.all_reduce, base.t(), "sum", "", ranks, gs
            )
            checks.expect(f"all_reduce non-contiguous gs={gs}", out, expected)
    return checks.failures


def body_all_reduce_coalesced(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    shapes = [
        ((3, 2), torch.float32),
        ((5,), torch.int64),
        ((), torch.bfloat16),
        ((0, 4), torch.float64),
    ]
    for ranks, gs in layouts(world_size):
        members, _ = chunk_of(rank, ranks, gs)
        for op in ["sum", "max", "avg", "product"]:
            xs = [make_input(rank, s, d, i) for i, (s, d) in enumerate(shapes)]
            before = [x.clone() for x in xs]
            outs = ops.all_reduce_coalesced(xs, op, "", ranks, gs)
            outs = [ops.wait_tensor(o) for o in outs]
            for i, ((s, d), out) in enumerate(zip(shapes, outs)):
                expected = reduce_reference([make_input(m, s, d, i) for m in members], op)
                checks.expect(f"all_reduce_coalesced[{i}] {op} gs={gs}", out, expected)
                checks.expect(f"all_reduce_coalesced[{i}] input", xs[i], before[i], exact=True)
    return checks.failures


def gathered(inputs: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(inputs) if inputs[0].dim() == 0 else torch.cat(inputs)


def body_all_gather(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, _ = chunk_of(rank, ranks, gs)
        for salt, dtype in enumerate(MOVE_DTYPES):
            for shape in [(3, 2), (0, 5), (), (2, 0)]:
                x = make_input(rank, shape, dtype, salt)
                expected = gathered([make_input(m, shape, dtype, salt) for m in members])
                out = checks.functional(
                    f"all_gather {dtype} {shape}", ops.all_gather_into_tensor, x, "", ranks, gs
                )
                checks.expect(
                    f"all_gather {dtype} {shape} ranks={ranks} gs={gs}", out, expected, exact=True
                )
        # coalesced: mixed shapes and dtypes in one call
        specs = [((2, 3), torch.float32), ((4,), torch.int8), ((), torch.complex64)]
        xs = [make_input(rank, s, d, i) for i, (s, d) in enumerate(specs)]
        outs = [ops.wait_tensor(o) for o in ops.all_gather_into_tensor_coalesced(xs, "", ranks, gs)]
        for i, ((s, d), out) in enumerate(zip(specs, outs)):
            expected = gathered([make_input(m, s, d, i) for m in members])
            checks.expect(
                f"all_gather_into_tensor_coalesced[{i}] gs={gs}", out, expected, exact=True
            )
    return checks.failures


def body_reduce_scatter(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, index = chunk_of(rank, ranks, gs)
        for salt, dtype in enumerate(REDUCE_DTYPES):
            for op in REDUCE_OPS:
                if not reduce_allowed(op, dtype):
                    continue
                for rows in [2, 0]:
                    shape = (gs * rows, 3)
                    x = make_input(rank, shape, dtype, salt)
                    full = reduce_reference(
                        [make_input(m, shape, dtype, salt) for m in members], op
                    )
                    expected = full[index * rows : (index + 1) * rows]
                    what = f"reduce_scatter {op} {dtype} {shape} ranks={ranks} gs={gs}"
                    out = checks.functional(what, ops.reduce_scatter_tensor, x, op, "", ranks, gs)
                    checks.expect(what, out, expected)
        specs = [((gs * 2, 2), torch.float32), ((gs,), torch.int32)]
        xs = [make_input(rank, s, d, i) for i, (s, d) in enumerate(specs)]
        outs = [
            ops.wait_tensor(o)
            for o in ops.reduce_scatter_tensor_coalesced(xs, "sum", "", ranks, gs)
        ]
        for i, ((s, d), out) in enumerate(zip(specs, outs)):
            full = reduce_reference([make_input(m, s, d, i) for m in members], "sum")
            rows = s[0] // gs
            checks.expect(
                f"reduce_scatter_coalesced[{i}] gs={gs}",
                out,
                full[index * rows : (index + 1) * rows],
            )
    return checks.failures


def split_plan(gs: int) -> list[list[int]]:
    """rows member i sends to member j: uneven, with zeros."""
    return [[(i + 2 * j) % 3 for j in range(gs)] for i in range(gs)]


def body_all_to_all(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, me = chunk_of(rank, ranks, gs)
        plan = split_plan(gs)
        for salt, dtype in enumerate(MOVE_DTYPES):
            # uneven splits
            inputs = [make_input(m, (sum(plan[i]), 2), dtype, salt) for i, m in enumerate(members)]
            in_splits = plan[me]
            out_splits = [plan[i][me] for i in range(gs)]
            pieces = []
            for i in range(gs):
                offset = sum(plan[i][:me])
                pieces.append(inputs[i][offset : offset + plan[i][me]])
            what = f"all_to_all_single uneven {dtype} ranks={ranks} gs={gs}"
            out = checks.functional(
                what, ops.all_to_all_single, inputs[me], out_splits, in_splits, "", ranks, gs
            )
            checks.expect(what, out, torch.cat(pieces), exact=True)
            # even split (no split sizes)
            inputs = [make_input(m, (gs * 2, 3), dtype, salt) for m in members]
            expected = torch.cat([inputs[i][me * 2 : me * 2 + 2] for i in range(gs)])
            what = f"all_to_all_single even {dtype} ranks={ranks} gs={gs}"
            out = checks.functional(
                what, ops.all_to_all_single, inputs[me], None, None, "", ranks, gs
            )
            checks.expect(what, out, expected, exact=True)
    return checks.failures


def body_broadcast(rank: int, world_size: int, inplace: bool) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, _ = chunk_of(rank, ranks, gs)
        for salt, dtype in enumerate(MOVE_DTYPES):
            for src in range(gs):
                for shape in [(3, 2), ()]:
                    x = make_input(rank, shape, dtype, salt)
                    expected = make_input(members[src], shape, dtype, salt)
                    what = f"broadcast{'_' if inplace else ''} src={src} {dtype} {shape} ranks={ranks} gs={gs}"
                    if inplace:
                        ops.broadcast_(x, src, "", ranks, gs)
                        checks.expect(what, ops.wait_tensor(x), expected, exact=True)
                    else:
                        out = checks.functional(what, ops.broadcast, x, src, "", ranks, gs)
                        checks.expect(what, out, expected, exact=True)
        if inplace:  # non-contiguous target
            x = make_input(rank, (3, 4), torch.float32, 5).t()
            ops.broadcast_(x, 0, "", ranks, gs)
            ops.wait_tensor(x)
            checks.expect(
                "broadcast_ non-contiguous",
                x,
                make_input(members[0], (3, 4), torch.float32, 5).t(),
                exact=True,
            )
    return checks.failures


def body_reduce(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, me = chunk_of(rank, ranks, gs)
        for salt, dtype in enumerate(REDUCE_DTYPES):
            for op in REDUCE_OPS:
                if not reduce_allowed(op, dtype):
                    continue
                dst = salt % gs
                x = make_input(rank, (4, 2), dtype, salt)
                full = reduce_reference([make_input(m, (4, 2), dtype, salt) for m in members], op)
                expected = full if me == dst else torch.zeros_like(full)
                what = f"reduce {op} dst={dst} {dtype} ranks={ranks} gs={gs}"
                out = checks.functional(what, ops.reduce, x, op, dst, "", ranks, gs)
                checks.expect(what, out, expected)
    return checks.failures


def body_gather_scatter(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, me = chunk_of(rank, ranks, gs)
        for salt, dtype in enumerate(MOVE_DTYPES):
            for root in range(gs):
                for shape in [(2, 3), ()]:
                    x = make_input(rank, shape, dtype, salt)
                    full = gathered([make_input(m, shape, dtype, salt) for m in members])
                    expected = full if me == root else torch.zeros_like(full)
                    what = f"gather dst={root} {dtype} {shape} ranks={ranks} gs={gs}"
                    out = checks.functional(what, ops.gather, x, root, "", ranks, gs)
                    checks.expect(what, out, expected, exact=True)
                # scatter: only src's input is read
                x = make_input(rank, (gs * 2, 3), dtype, salt)
                source = make_input(members[root], (gs * 2, 3), dtype, salt)
                what = f"scatter src={root} {dtype} ranks={ranks} gs={gs}"
                out = checks.functional(what, ops.scatter, x, root, "", ranks, gs)
                checks.expect(what, out, source[me * 2 : me * 2 + 2], exact=True)
    return checks.failures


def body_permute(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    checks = Checks(rank)
    for ranks, gs in layouts(world_size):
        members, me = chunk_of(rank, ranks, gs)
        perms = [[(i + 1) % gs for i in range(gs)], list(range(gs)), list(reversed(range(gs)))]
        for salt, dtype in enumerate(MOVE_DTYPES):
            for src_dst in perms:
                sender = src_dst.index(me)
                for shape in [(3, 2), ()]:
                    x = make_input(rank, shape, dtype, salt)
                    expected = make_input(members[sender], shape, dtype, salt)
                    what = f"permute {src_dst} {dtype} {shape} ranks={ranks} gs={gs}"
                    out = checks.functional(what, ops.permute, x, src_dst, "", ranks, gs)
                    checks.expect(what, out, expected, exact=True)
    return checks.failures


# ------------------------------------------------------------------------------- tests (pytest)


def assert_no_failures(results: list[list[str]]) -> None:
    failures = [f for per_rank in results for f in per_rank]
    assert not failures, f"{len(failures)} mismatches, first ones:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("inplace", [False, True], ids=["functional", "inplace"])
def test_all_reduce(pool, inplace):
    assert_no_failures(pool.run(body_all_reduce, inplace))


def test_all_reduce_coalesced(pool):
    assert_no_failures(pool.run(body_all_reduce_coalesced))


def test_all_gather_into_tensor(pool):
    assert_no_failures(pool.run(body_all_gather))


def test_reduce_scatter_tensor(pool):
    assert_no_failures(pool.run(body_reduce_scatter))


def test_all_to_all_single(pool):
    assert_no_failures(pool.run(body_all_to_all))


@pytest.mark.parametrize("inplace", [False, True], ids=["functional", "inplace"])
def test_broadcast(pool, inplace):
    assert_no_failures(pool.run(body_broadcast, inplace))


def test_reduce(pool):
    assert_no_failures(pool.run(body_reduce))


def test_gather_and_scatter(pool):
    assert_no_failures(pool.run(body_gather_scatter))


def test_permute(pool):
    assert_no_failures(pool.run(body_permute))


def body_transport_in_use(rank: int, world_size: int) -> list[str]:
    import c10d_func

    ranks = list(range(world_size))
    ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", "which", ranks, world_size))
    return [g["backend"] for g in c10d_func.groups() if g["tag"] == "which" and g["ranks"] == ranks]


def test_the_pool_runs_on_its_transport(pool):
    # The default CPU transport is shm for ranks on one host; the gloo pools choose Gloo.
    expected = "gloo" if pool.env.get("C10D_FUNC_CPU_TRANSPORT") == "gloo" else "shm"
    assert pool.run(body_transport_in_use) == [[expected]] * pool.world_size
