"""One correctness check per op and implementation, from inputs with closed-form results.

Every rank's data encodes its rank (and, for split ops, the destination chunk), so a wrong sum, a
wrong chunk order or a wrong broadcast root all show up as a mismatch.
"""

from __future__ import annotations

import torch

from .impls import Collective, GroupCtx

CHUNK = 4  # elements per rank chunk: small, but more than one so that offsets matter


def _full(value: float, device: torch.device) -> torch.Tensor:
    return torch.full((CHUNK,), float(value), dtype=torch.float32, device=device)


def _cat(values: list[float], device: torch.device) -> torch.Tensor:
    return torch.cat([_full(v, device) for v in values])


def make_case(op: str, ctx: GroupCtx, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's input, the output this rank must get) for `op` on the world group."""
    r, n = ctx.rank, ctx.world
    tri = n * (n + 1) / 2  # sum of every rank's (rank + 1)
    if op == "all_reduce":
        return _full(r + 1, device), _full(tri, device)
    if op == "all_gather":
        return _full(r + 1, device), _cat([i + 1 for i in range(n)], device)
    if op == "reduce_scatter":
        # chunk j of rank i holds (i+1)(j+1): rank r receives sum_i (i+1)(r+1)
        return _cat([(r + 1) * (j + 1) for j in range(n)], device), _full((r + 1) * tri, device)
    if op == "all_to_all":
        # chunk j of rank i holds 100(i+1)+j: rank r receives chunk r of every rank, in rank order
        sent = _cat([100 * (r + 1) + j for j in range(n)], device)
        return sent, _cat([100 * (i + 1) + r for i in range(n)], device)
    if op == "broadcast":
        return _full(r + 1, device), _full(ctx.src + 1, device)
    raise ValueError(f"unknown op {op}")


OK, MISMATCH, ERROR = "ok", "mismatch", "error"  # an ERROR (exception) is not timed
UNAVAILABLE = "unavailable"  # the implementation (or this op of it) does not exist here


def check(op: str, fn: Collective, ctx: GroupCtx, device: torch.device) -> tuple[str, str | None]:
    """(OK, None) when `fn` computes `op` correctly on this rank, else (MISMATCH|ERROR, why).

    An exception is returned as text rather than raised so that the run goes on with the other
    implementations; the caller agrees with the other ranks on the outcome.
    """
    x, expected = make_case(op, ctx, device)
    before = x.clone()
    try:
        out = fn(x)
    except Exception as e:  # noqa: BLE001 - any failure of the op under test is a result
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        return ERROR, f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]
    if not torch.equal(x, before):
        return MISMATCH, "the input was modified (a functional op must not write its input)"
    if out.shape != expected.shape:
        return MISMATCH, f"wrong shape {tuple(out.shape)}, expected {tuple(expected.shape)}"
    if not torch.allclose(out.cpu(), expected.cpu()):
        return MISMATCH, f"wrong values {out.cpu().tolist()}, expected {expected.cpu().tolist()}"
    return OK, None
