"""The byte reduction every CPU transport runs on members' buffers (transports/byte_reduce.h):
a plain loop, but min/max beyond 64 KiB and bf16/fp16 beyond 4 KiB ATen's kernels. Both ways are
compared here with torch's own ops on random bit patterns of every dtype and reduction a schema
accepts (NaN, infinities and integer overflow included), 2 to 4 members, into a fresh output and
in place; and reduce_into at sizes either side of its choice. One process, no communication:
the collectives' tests cover the same code end to end with known values.
"""

from __future__ import annotations

import functools

import c10d_func
import pytest
import torch
from reference import MOVE_DTYPES, REDUCE_OPS, reduce_allowed

reduce_for_test = c10d_func._C.reduce_for_test

# Every dtype a collective moves, but fp8, which no reduction takes.
DTYPES = [d for d in MOVE_DTYPES if d != torch.float8_e4m3fn]


def random_bits(dtype: torch.dtype, count: int, generator: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=generator).bool()
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (count * size,), dtype=torch.uint8, generator=generator)
    return raw.view(dtype)


def torch_reduction(inputs: list[torch.Tensor], op: str) -> torch.Tensor:
    """What the transports must compute (avg is staged as a sum; the caller divides)."""
    dtype = inputs[0].dtype
    if op in ("sum", "avg") and dtype in (torch.bfloat16, torch.float16) and len(inputs) > 2:
        # More than two members' bf16/fp16 sum accumulates in float and rounds once.
        total = inputs[0].float()
        for x in inputs[1:]:
            total = total + x.float()
        return total.to(dtype)
    fn = {
        "sum": torch.add,
        "avg": torch.add,
        "product": torch.mul,
        "min": torch.minimum,
        "max": torch.maximum,
        "band": torch.bitwise_and,
        "bor": torch.bitwise_or,
        "bxor": torch.bitwise_xor,
    }[op]
    return functools.reduce(fn, inputs)


def assert_same(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """Equal values and NaN where the reference has NaN (payloads may differ)."""
    got_nan, want_nan = torch.isnan(got), torch.isnan(want)
    assert torch.equal(got_nan, want_nan), f"{what}: NaN at other places\n{got}\n{want}"
    zero = torch.zeros((), dtype=got.dtype)
    assert torch.equal(torch.where(got_nan, zero, got), torch.where(want_nan, zero, want)), (
        f"{what}\n got {got}\n want {want}"
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d).removeprefix("torch.") for d in DTYPES])
def test_the_loop_and_aten_compute_what_torch_computes(dtype):
    generator = torch.Generator().manual_seed(1234)
    compared = 0
    for op in REDUCE_OPS:
        if not reduce_allowed(op, dtype):
            continue
        for members in (2, 3, 4):
            for count in (1, 7, 64, 1000):
                inputs = [random_bits(dtype, count, generator) for _ in range(members)]
                want = torch_reduction(inputs, op)
                what = f"{dtype} {op} members={members} count={count}"
                for way in ("loop", "aten"):
                    out = torch.empty_like(inputs[0])
                    assert reduce_for_test(out, inputs, op, way), f"{what}: no {way}"
                    assert_same(out, want, f"{what} ({way})")
                    # In place: the first member's buffer is the output.
                    copies = [x.clone() for x in inputs]
                    reduce_for_test(copies[0], copies, op, way)
                    assert_same(copies[0], want, f"{what} ({way}, in place)")
                compared += 1
    assert compared >= 2 * 3 * 4  # at least two reductions, every member count and size


def test_known_values():
    def loop(inputs, op):
        out = torch.empty_like(inputs[0])
        assert reduce_for_test(out, inputs, op, "loop")
        return out

    i8 = torch.tensor([100], dtype=torch.int8)
    assert loop([i8, i8], "sum").item() == -56  # wraps, as torch does
    nan, one = torch.tensor([float("nan")]), torch.tensor([1.0])
    assert loop([one, nan], "min").isnan().all() and loop([nan, one], "max").isnan().all()
    bf = torch.tensor([256.0], dtype=torch.bfloat16)
    ones = torch.ones(1, dtype=torch.bfloat16)
    # 256 + 1 + 1 + 1 = 259 rounds once (to even: 260); rounding after each addition stays 256.
    assert loop([bf, ones, ones, ones], "sum").item() == 260.0
    zero = torch.tensor([-0.0], dtype=torch.bfloat16)
    assert loop([zero, zero, zero], "sum").signbit().all()  # -0.0 stays -0.0
    # A peer's bool byte other than 0 or 1 reads as true, and results are 0 or 1.
    odd = torch.tensor([7], dtype=torch.uint8).view(torch.bool)
    true = torch.ones(1, dtype=torch.bool)
    assert loop([odd, true], "bxor").view(torch.uint8).item() == 0
    assert loop([odd, true], "band").view(torch.uint8).item() == 1


def test_dtypes_without_a_loop_go_to_aten():
    inputs = [torch.ones(4, dtype=torch.uint16) for _ in range(2)]
    assert not reduce_for_test(torch.empty(4, dtype=torch.uint16), inputs, "sum", "loop")


@pytest.mark.parametrize("op", ["sum", "max", "product"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bfloat16", "float32"])
def test_reduce_into_at_any_size_aliased_anywhere(op, dtype):
    generator = torch.Generator().manual_seed(99)
    # bf16/fp16 take the loop up to 4 KiB and ATen beyond; float32 the loop at any size for sum
    # and product, up to 64 KiB for max.
    counts = (2047, 2048, 2049, 70000) if dtype == torch.bfloat16 else (1, 70000, 1 << 20)
    for count in counts:
        inputs = [random_bits(dtype, count, generator) for _ in range(3)]
        # The output is the last member's buffer: reduce_into folds it in first (swapped with
        # the first member), which decides the order of the floating-point folds.
        want = torch_reduction([inputs[2], inputs[1], inputs[0]], op)
        copies = [x.clone() for x in inputs]
        reduce_for_test(copies[2], copies, op, "auto")
        assert_same(copies[2], want, f"{op} {dtype} count={count}")
