"""The in-place and out= forms torch's functional set has besides the functional ops:
all_reduce_coalesced_, all_gather_into_tensor_out and reduce_scatter_tensor_out (contiguous and
strided `out`), eager and compiled with inductor's Python and C++ wrappers, at 2 and 4 ranks on
both CPU transports; every result compared with a reference from every rank's known input."""

from __future__ import annotations

import c10d_func  # noqa: F401  (registers torch.ops.c10d_func)
import pytest
import torch
from reference import make_input, mismatch
from test_collectives import assert_no_failures

ops = torch.ops.c10d_func
ROWS, COLS = 64, 256


def inputs(world_size: int) -> list[torch.Tensor]:
    return [make_input(r, (ROWS, COLS), torch.float32, 31) for r in range(world_size)]


def expected(rank: int, world_size: int) -> list[torch.Tensor]:
    xs = inputs(world_size)
    total = torch.stack(xs).sum(0)
    return [
        torch.cat(xs) * 2,  # all_gather_into_tensor_out of 2x
        total.chunk(world_size)[rank] + 0,  # reduce_scatter_tensor_out
        total + world_size,  # all_reduce_coalesced_ of x + 1
        torch.stack(xs).amax(0) * 3,  # all_reduce_coalesced_ (max) of 3x
    ]


def program(x: torch.Tensor, ranks: list[int], out_t: torch.Tensor | None = None):
    n = len(ranks)
    gathered = torch.empty(n * x.shape[0], x.shape[1]) if out_t is None else out_t
    ops.all_gather_into_tensor_out(x * 2, "", ranks, n, out=gathered)
    scattered = torch.empty(x.shape[0] // n, x.shape[1])
    ops.reduce_scatter_tensor_out(x, "sum", "", ranks, n, out=scattered)
    a, b = x + 1, x * 3
    ops.all_reduce_coalesced_([a], "sum", "", ranks, n)
    ops.all_reduce_coalesced_([b], "max", "", ranks, n)
    return [ops.wait_tensor(t) for t in (gathered, scattered, a, b)]


def check(rank: int, world_size: int, outs: list[torch.Tensor], what: str) -> list[str]:
    problems = []
    for i, (out, ref) in enumerate(zip(outs, expected(rank, world_size))):
        problem = mismatch(out, ref, exact=False)
        if problem:
            problems.append(f"rank {rank} {what} output {i}: {problem.splitlines()[0]}")
    return problems


def body_eager(rank: int, world_size: int) -> list[str]:
    ranks = list(range(world_size))
    x = make_input(rank, (ROWS, COLS), torch.float32, 31)
    problems = check(rank, world_size, program(x, ranks), "contiguous out")
    # A strided `out` (a transposed view) is written through a contiguous staging buffer.
    strided = torch.empty(COLS, world_size * ROWS).t()
    outs = program(x, ranks, strided)
    problems += check(rank, world_size, outs, "strided out")
    if outs[0].data_ptr() != strided.data_ptr():
        problems.append("the strided out was not written in place")
    return problems


def test_in_place_and_out_forms_eager(pool):
    assert_no_failures(pool.run(body_eager))


def body_compiled(rank: int, world_size: int, cpp_wrapper: bool) -> list[str]:
    torch._dynamo.reset()
    ranks = list(range(world_size))
    with torch._inductor.config.patch({"cpp_wrapper": cpp_wrapper}):
        compiled = torch.compile(lambda x: program(x, ranks), fullgraph=True)
        outs = compiled(make_input(rank, (ROWS, COLS), torch.float32, 31))
    return check(rank, world_size, outs, "compiled")


@pytest.mark.parametrize("cpp_wrapper", [False, True], ids=["python-wrapper", "cpp-wrapper"])
def test_in_place_and_out_forms_compiled(pool, cpp_wrapper):
    assert_no_failures(pool.run(body_compiled, cpp_wrapper, timeout=600))


def test_out_shape_and_dtype_are_checked():
    x = torch.ones(4, 3, device="meta")
    with pytest.raises(RuntimeError, match=r"all_gather_into_tensor_out: argument 'out' has shape"):
        ops.all_gather_into_tensor_out(x, "", [0, 1], 2, out=torch.empty(4, 3, device="meta"))
    with pytest.raises(RuntimeError, match=r"reduce_scatter_tensor_out: argument 'out' is Int"):
        ops.reduce_scatter_tensor_out(
            x, "sum", "", [0, 1], 2, out=torch.empty(2, 3, dtype=torch.int32, device="meta")
        )
