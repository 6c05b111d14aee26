"""Known inputs and independent references.

Every rank's input is a pure function of (global rank, shape, dtype, salt), so any rank can build
every member's input and compute the expected result with plain torch ops, without any
communication. Values are small multiples of 1/4 so sums are exact even in bf16/fp16.
"""

from __future__ import annotations

import functools

import torch

REDUCE_OPS = ["sum", "avg", "product", "min", "max", "band", "bor", "bxor"]
REDUCE_DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]
# Ops that only move data take every dtype, fp8 and the narrow ints included.
MOVE_DTYPES = REDUCE_DTYPES + [
    torch.float8_e4m3fn,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.complex128,
]


def reduce_allowed(op: str, dtype: torch.dtype) -> bool:
    if dtype.is_complex:
        return op in ("sum", "avg")
    if dtype == torch.bool:
        return op != "avg"
    if op in ("band", "bor", "bxor"):
        return not dtype.is_floating_point
    return True


def make_input(
    rank: int, shape: tuple[int, ...], dtype: torch.dtype, salt: int = 0
) -> torch.Tensor:
    """Made on the CPU from a seeded CPU generator (the same values on every device), then moved
    to torch's default device: the CUDA tests run the CPU suite's bodies with `cuda` as the
    default device (test_cuda_ranks.py)."""
    g = torch.Generator().manual_seed(salt * 7919 + rank * 104729 + 17)

    def ints(low: int, high: int) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=g, device="cpu")

    def quarters() -> torch.Tensor:
        return ints(-8, 9).double() / 4

    if dtype == torch.bool:
        made = ints(0, 2).bool()
    elif dtype.is_complex:
        made = torch.complex(quarters(), quarters()).to(dtype)
    elif dtype.is_floating_point:
        made = quarters().to(dtype)
    elif dtype == torch.uint8:
        made = ints(0, 16).to(dtype)
    else:
        made = ints(-8, 9).to(dtype)
    return made.to(torch.get_default_device())


def reduce_reference(inputs: list[torch.Tensor], op: str) -> torch.Tensor:
    dtype = inputs[0].dtype
    n = len(inputs)
    stacked = torch.stack(inputs)
    if dtype == torch.bool:
        if op in ("sum", "max", "bor"):
            return stacked.any(0)
        if op in ("product", "min", "band"):
            return stacked.all(0)
        return (stacked.long().sum(0) % 2).bool()  # bxor
    if dtype.is_complex:
        total = stacked.to(torch.complex128).sum(0)
        return (total / n if op == "avg" else total).to(dtype)
    wide = stacked.double() if dtype.is_floating_point else stacked.long()
    if op == "sum":
        result = wide.sum(0)
    elif op == "avg":
        total = wide.sum(0)
        result = (
            total / n if dtype.is_floating_point else torch.div(total, n, rounding_mode="trunc")
        )
    elif op == "product":
        result = wide.prod(0)
    elif op == "min":
        result = wide.amin(0)
    elif op == "max":
        result = wide.amax(0)
    else:
        fn = {"band": torch.bitwise_and, "bor": torch.bitwise_or, "bxor": torch.bitwise_xor}[op]
        result = functools.reduce(fn, list(wide))
    return result.to(dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of a tensor, so any dtype (fp8 included) compares exactly."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def mismatch(out: torch.Tensor, expected: torch.Tensor, exact: bool) -> str | None:
    """None when equal; else a short description."""
    if out.shape != expected.shape or out.dtype != expected.dtype:
        return (
            f"got {tuple(out.shape)} {out.dtype}, expected {tuple(expected.shape)} {expected.dtype}"
        )
    if (
        exact
        or expected.dtype in (torch.bool,)
        or not (expected.dtype.is_floating_point or expected.dtype.is_complex)
    ):
        if torch.equal(bits(out), bits(expected)):
            return None
        return f"values differ:\n got {out}\n expected {expected}"
    try:
        torch.testing.assert_close(out, expected)
    except AssertionError as error:
        return str(error).splitlines()[0] + f"\n got {out}\n expected {expected}"
    return None
