"""What inductor generates for c10d_func's ops: PyTorch's own inductor tests for its functional
collectives (test/distributed/test_c10d_functional_native.py, CompileTest), rewritten for
c10d_func's op names and run on CPU in a real 2-rank world, plus the tensor-parallel step.

Checked in the generated code: collectives re-inplaced onto buffers inductor allocated (a graph
input is cloned first), no extra copy on return, waits whose result is never assigned, buffers
reused after an in-place collective, and a collective issued before independent compute and
waited after it. Every compiled result is also compared with a reference.
"""

from __future__ import annotations

import re

import c10d_func as funcol
import torch
from reference import mismatch
from test_collectives import assert_no_failures
from torch._inductor.utils import run_and_get_code

GROUP = [0, 1]


_generated: list[str] = []  # every program compiled in this rank, for the checks they all share


def compiled_code(fn, *args):  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    with torch.no_grad():
        out, codes = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
    _generated.append(codes[0])
    return out, codes[0]


def full(rank: int, *shape: int) -> torch.Tensor:
    return torch.arange(float(torch.Size(shape).numel())).reshape(shape) / 8 + rank


def in_order(code: str, *patterns: str) -> list[str]:
    """The patterns (regexes) that are not found in this order."""
    missing, at = [], 0
    for pattern in patterns:
        match = re.compile(pattern).search(code, at)
        if match is None:
            missing.append(pattern)
        else:
            at = match.end()
    return missing


def reinplaced_buffers(code: str, op: str) -> list[str]:
    return re.findall(rf"torch\.ops\.c10d_func\.{op}\.default\(\[?(buf\d+)", code)


def body_all_reduce(rank: int, world_size: int) -> list[str]:
    def func(arg: torch.Tensor):  # type: ignore[no-untyped-def]
        buf0 = arg + 42
        ar0 = funcol.wait_tensor(funcol.all_reduce(buf0, "avg", GROUP))  # in place on buf0
        ar1 = funcol.wait_tensor(funcol.all_reduce(arg, "avg", GROUP))  # a clone of the input
        return ar0, ar1

    (ar0, ar1), code = compiled_code(func, full(rank, 4, 4))
    problems = [mismatch(ar0, full(0, 4, 4) + 42.5, True), mismatch(ar1, full(0, 4, 4) + 0.5, True)]
    bufs = reinplaced_buffers(code, "all_reduce_")
    if len(bufs) != 2:
        problems.append(f"expected two all_reduce_ on inductor buffers, found {bufs}")
    else:
        problems += in_order(
            code,
            rf"{bufs[0]} = empty_strided",
            rf"all_reduce_\.default\({bufs[0]}, 'avg', '', \[0, 1\], 2\)",
            rf"wait_tensor\.default\({bufs[0]}\)",
            rf"all_reduce_\.default\({bufs[1]}",
            rf"wait_tensor\.default\({bufs[1]}\)",
            rf"return \({bufs[0]}, {bufs[1]}, \)",  # no extra copy on return
        )
    return problems


def body_all_reduce_coalesced(rank: int, world_size: int) -> list[str]:
    def func(args: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        bufs = [a + 42 for a in args]
        ar0 = [funcol.wait_tensor(t) for t in funcol.all_reduce_coalesced(bufs, "avg", GROUP)]
        ar1 = [funcol.wait_tensor(t) for t in funcol.all_reduce_coalesced(args, "avg", GROUP)]
        return ar0, ar1

    args = [full(rank, 4, 4), full(rank, 3)]
    (ar0, ar1), code = compiled_code(func, args)
    problems = [
        mismatch(ar0[1], full(0, 3) + 42.5, True),
        mismatch(ar1[0], full(0, 4, 4) + 0.5, True),
    ]
    calls = re.findall(r"all_reduce_coalesced_\.default\(\[(buf\d+), (buf\d+)\]", code)
    if len(calls) != 2:
        problems.append(f"expected two all_reduce_coalesced_ on inductor buffers, found {calls}")
    else:
        returned = ", ".join(b for call in calls for b in call)
        problems += in_order(code, rf"return \({returned}, \)")
    return problems


def body_inplace_on_view_and_reuse(rank: int, world_size: int) -> list[str]:
    def on_view(arg: torch.Tensor) -> torch.Tensor:
        return funcol.wait_tensor(funcol.all_reduce((arg + 10)[:2], "avg", GROUP))

    out, code = compiled_code(on_view, full(rank, 4, 4))
    problems = [mismatch(out, (full(0, 4, 4) + 10.5)[:2], True)]
    buf = reinplaced_buffers(code, "all_reduce_")
    problems += in_order(code, rf"all_reduce_\.default\({buf[0]}" if buf else "all_reduce_")

    def reuse(arg: torch.Tensor):  # type: ignore[no-untyped-def]
        ar0 = funcol.wait_tensor(funcol.all_reduce(arg + 42, "avg", GROUP))
        buf1 = torch.mm(arg, ar0)
        return buf1, torch.mm(arg, buf1)  # the all_reduce's buffer is free again here

    arg = full(rank, 4, 4)
    (b1, b2), code = compiled_code(reuse, arg)
    ref0 = full(0, 4, 4) + 42.5
    problems += [mismatch(b1, arg @ ref0, False), mismatch(b2, arg @ (arg @ ref0), False)]
    buf = reinplaced_buffers(code, "all_reduce_")
    if buf:
        problems += in_order(
            code, rf"all_reduce_\.default\({buf[0]}", rf"= {buf[0]}; del {buf[0]}  # reuse"
        )
    else:
        problems.append("no all_reduce_ on an inductor buffer")
    return problems


def body_out_of_place_collectives(rank: int, world_size: int) -> list[str]:
    def func(arg: torch.Tensor, args: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        ag = funcol.wait_tensor(funcol.all_gather_tensor(arg, 0, GROUP))
        rs = funcol.wait_tensor(funcol.reduce_scatter_tensor(arg, "avg", 0, GROUP))
        agc = [funcol.wait_tensor(t) for t in funcol.all_gather_into_tensor_coalesced(args, GROUP)]
        rsc = [
            funcol.wait_tensor(t)
            for t in funcol.reduce_scatter_tensor_coalesced(args, "sum", [0, 0], GROUP)
        ]
        return ag, rs, *agc, *rsc

    arg, args = full(rank, 4, 4), [full(rank, 4, 4), full(rank, 2)]
    outs, code = compiled_code(func, arg, args)
    both = [full(0, 4, 4), full(1, 4, 4)]
    problems = [
        mismatch(outs[0], torch.cat(both), True),
        mismatch(outs[1], ((both[0] + both[1]) / 2)[2 * rank : 2 * rank + 2], True),
        mismatch(outs[4], (both[0] + both[1])[2 * rank : 2 * rank + 2], True),
    ]
    problems += in_order(
        code,
        r"(buf\d+) = torch\.ops\.c10d_func\.all_gather_into_tensor\.default\(arg0_1",
        r"(buf\d+) = torch\.ops\.c10d_func\.reduce_scatter_tensor\.default\(arg0_1",
        r"(buf\d+) = torch\.ops\.c10d_func\.all_gather_into_tensor_coalesced\.default\(\[",
        r"(buf\d+) = torch\.ops\.c10d_func\.reduce_scatter_tensor_coalesced\.default\(\[",
    )
    return problems


def body_broadcast(rank: int, world_size: int) -> list[str]:
    def func(arg: torch.Tensor):  # type: ignore[no-untyped-def]
        br0 = funcol.wait_tensor(funcol.broadcast(arg + 42, 1, GROUP))
        br1 = funcol.wait_tensor(funcol.broadcast(arg, 0, GROUP))
        return br0, br1

    (br0, br1), code = compiled_code(func, full(rank, 4, 4))
    problems = [mismatch(br0, full(1, 4, 4) + 42, True), mismatch(br1, full(0, 4, 4), True)]
    bufs = reinplaced_buffers(code, "broadcast_")
    if len(bufs) != 2:
        problems.append(f"expected two broadcast_ on inductor buffers, found {bufs}")
    else:
        problems += in_order(code, rf"return \({bufs[0]}, {bufs[1]}, \)")
    return problems


def body_tensor_parallel_step(rank: int, world_size: int) -> list[str]:
    """A row-parallel linear: the matmul's output is all-reduced in place (no copy), the
    collective is issued before the independent matmul and waited after it."""

    def step(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        y = funcol.all_reduce(x @ w1, "sum", GROUP)
        z = (x @ w2).relu()
        return funcol.wait_tensor(y) * z

    x, w1, w2 = full(rank, 16, 16), full(2, 16, 16) / 100, full(3, 16, 16) / 100
    out, code = compiled_code(step, x, w1, w2)
    expected = (full(0, 16, 16) @ w1 + full(1, 16, 16) @ w1) * (x @ w2).relu()
    problems = [mismatch(out, expected, False)]
    collective, independent, wait = (
        r"torch\.ops\.c10d_func\.all_reduce_\.default\(buf\d+",  # in place on the mm output
        r"extern_kernels\.mm\(arg0_1, arg2_1",
        r"torch\.ops\.c10d_func\.wait_tensor\.default\(buf\d+\)",
    )
    first_mm = r"extern_kernels\.mm\(arg0_1, arg1_1, out=(buf\d+)\)"
    if torch.torch_version.TorchVersion(torch.__version__) >= (2, 14):
        # Independent compute while the collective runs: 2.14's inductor sinks the wait.
        problems += in_order(code, first_mm, collective, independent, wait)
    else:
        # torch 2.11's inductor keeps the wait where tracing put it, right after the collective,
        # for torch's own funcol too (its all_reduce waits at once under tracing): the same order.
        problems += in_order(code, first_mm, collective, wait, independent)
    mm_out = re.search(r"extern_kernels\.mm\(arg0_1, arg1_1, out=(buf\d+)\)", code)
    if mm_out and f"all_reduce_.default({mm_out.group(1)}," not in code:
        problems.append("the all_reduce did not run in place on the matmul's output")
    return problems


BODIES = [
    body_all_reduce,
    body_all_reduce_coalesced,
    body_inplace_on_view_and_reuse,
    body_out_of_place_collectives,
    body_broadcast,
    body_tensor_parallel_step,
]


def body_every_case(rank: int, world_size: int) -> list[str]:
    _generated.clear()
    problems = []
    for body in BODIES:
        problems += [f"rank {rank} {body.__name__}: {p}" for p in body(rank, world_size) if p]
    # A wait returns its input: its result is never a new buffer.
    if any("= torch.ops.c10d_func.wait_tensor.default" in code for code in _generated):
        problems.append(f"rank {rank}: a wait's result was assigned to a new buffer")
    return problems


def test_inductor_code_for_c10d_func_ops(pool2):
    assert_no_failures(pool2.run(body_every_case, timeout=600))
