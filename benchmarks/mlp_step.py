"""The compiled-step benchmark: a tensor-parallel two-layer MLP, forward + backward, per library.

The communication is Megatron's f/g pair written here as autograd.Functions over one all_reduce
callable (f: identity forward, all_reduce backward; g: all_reduce forward, identity backward), built
once with torch's funcol and once with c10d_func, so both libraries run the same program and only
the collective differs. Each library is compiled with the requested backend, falling back (full
graph -> graph breaks -> next backend -> eager) when compilation fails; what ran is recorded, and
with inductor a summary of the generated code (all_reduces in place, compute between a
collective's issue and its wait).
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn

from .impls import BUILDERS, C10D_FUNC, REDUCE_OP, Collective, GroupCtx
from .timing import measure_interleaved

TORCH_FUNCOL = "torch funcol"
STEP_LIBRARIES = [TORCH_FUNCOL, C10D_FUNC]
BATCH, D_MODEL, D_FF = 32, 256, 1024

# (backend, fullgraph) attempts per requested backend, best first; None backend = plain eager.
_FALLBACKS: dict[str, list[tuple[str | None, bool]]] = {
    "inductor": [
        ("inductor", True),
        ("inductor", False),
        ("aot_eager", True),
        ("aot_eager", False),
    ],
    "aot_eager": [("aot_eager", True), ("aot_eager", False)],
    "eager": [],
}
STEP_BACKENDS = list(_FALLBACKS)
OVERLAP = {
    "reorder_for_compute_comm_overlap": True,
    "reorder_for_compute_comm_overlap_passes": [
        "reorder_compute_for_overlap",
        "sink_waits",
        "raise_comms",
    ],
}


def _funcol_all_reduce(ctx: GroupCtx) -> Collective:
    def all_reduce(t: torch.Tensor) -> torch.Tensor:
        out = funcol.all_reduce(t, REDUCE_OP, ctx.group)
        # Eager funcol defers the wait to an AsyncCollectiveTensor; traced funcol already waited.
        return out.wait() if isinstance(out, funcol.AsyncCollectiveTensor) else out

    return all_reduce


def library_all_reduce(lib: str, ctx: GroupCtx) -> Collective:
    if lib == TORCH_FUNCOL:
        return _funcol_all_reduce(ctx)
    return BUILDERS[C10D_FUNC](ctx)["all_reduce"]


def make_f_g(all_reduce: Collective) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Megatron's f (copy into the tensor-parallel region) and g (reduce out of it)."""

    class CopyToTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return all_reduce(grad)

    class ReduceFromTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return all_reduce(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return grad

    return CopyToTP.apply, ReduceFromTP.apply


class TPMLP(nn.Module):
    """Column-parallel linear, GELU, row-parallel linear, squared-mean loss; this rank's shards."""

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor, all_reduce: Collective) -> None:
        super().__init__()
        self.w1 = nn.Parameter(w1.clone())  # (d_ff / world, d_model): rows of the full W1
        self.w2 = nn.Parameter(w2.clone())  # (d_model, d_ff / world): columns of the full W2
        self.f, self.g = make_f_g(all_reduce)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.f(x) @ self.w1.t())
        return self.g(h @ self.w2.t()).square().mean()


@dataclass
class Problem:
    """Full weights and input (identical on every rank) and the single-process reference."""

    w1: torch.Tensor
    w2: torch.Tensor
    x: torch.Tensor
    loss: torch.Tensor
    grads: dict[str, torch.Tensor]


def make_problem(world: int, device: torch.device) -> Problem:
    d_ff = D_FF // world * world  # the hidden dim is split evenly across ranks
    gen = torch.Generator().manual_seed(0)  # same values on every rank without communication
    w1 = (torch.randn(d_ff, D_MODEL, generator=gen) / D_MODEL**0.5).to(device)
    w2 = (torch.randn(D_MODEL, d_ff, generator=gen) / d_ff**0.5).to(device)
    x = torch.randn(BATCH, D_MODEL, generator=gen).to(device)
    rw1, rw2, rx = (t.clone().requires_grad_() for t in (w1, w2, x))
    loss = (F.gelu(rx @ rw1.t()) @ rw2.t()).square().mean()
    loss.backward()
    grads = {"w1": rw1.grad, "w2": rw2.grad, "x": rx.grad}
    return Problem(w1, w2, x, loss.detach(), grads)  # type: ignore[arg-type]


def _shard_rows(t: torch.Tensor, ctx: GroupCtx) -> torch.Tensor:
    k = t.shape[0] // ctx.world
    return t[ctx.rank * k : (ctx.rank + 1) * k]


def _check(
    model: TPMLP, x: torch.Tensor, loss: torch.Tensor, p: Problem, ctx: GroupCtx
) -> str | None:
    """None when this rank's loss and gradients match the single-process reference."""
    got = {"loss": loss.detach(), "w1": model.w1.grad, "w2": model.w2.grad, "x": x.grad}
    want = {
        "loss": p.loss,
        "w1": _shard_rows(p.grads["w1"], ctx),
        "w2": _shard_rows(p.grads["w2"].t(), ctx).t(),
        "x": p.grads["x"],
    }
    for name, ref in want.items():
        val = got[name]
        if val is None:
            return f"{name}: no gradient (the backward collective did not run)"
        if not torch.allclose(val, ref, rtol=1e-3, atol=1e-5):
            err = (val - ref).abs().max().item()
            return f"{name}: max abs error {err:.3g} against the single-process reference"
    return None


def _run_step(
    fn: Callable[[torch.Tensor], torch.Tensor], model: TPMLP, x: torch.Tensor
) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    x.grad = None
    loss = fn(x)
    loss.backward()
    return loss


# A kernel launch or extern call in inductor's Python wrapper: the compute a collective can
# overlap with.
_COMPUTE = re.compile(r"\.run\(|extern_kernels\.|cpp_fused")


def summarize_collectives(codes: list[str]) -> dict[str, Any]:
    """What inductor generated for the step's all_reduces (forward and backward programs): how
    many run in place on a buffer inductor allocated, and how many kernels each overlaps with,
    between the line that issues it and the line that waits it."""
    in_place, out_of_place, overlapped = 0, 0, []
    for code in codes:
        lines = code.splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\.all_reduce\.default\(", line):
                out_of_place += 1
            issued = re.search(r"\.all_reduce_\.default\((buf\d+)", line)
            if not issued:
                continue
            in_place += 1
            wait = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if re.search(rf"wait_tensor\.default\({issued.group(1)}\b", lines[j])
                ),
                len(lines),
            )
            overlapped.append(sum(1 for x in lines[i + 1 : wait] if _COMPUTE.search(x)))
    return {
        "all_reduce_in_place": in_place,
        "all_reduce_out_of_place": out_of_place,
        "kernels_between_issue_and_wait": overlapped,
    }


def _error_text(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _compile_with_fallback(
    model: TPMLP, x: torch.Tensor, backend: str, agree: Callable[[bool], bool]
) -> tuple[dict[str, Any], Callable[[torch.Tensor], torch.Tensor] | None, torch.Tensor | None]:
    """Compiles and runs the first step; every rank must take the same attempt (`agree`)."""
    notes: list[str] = []
    for compile_backend, fullgraph in [*_FALLBACKS[backend], (None, False)]:
        label = (
            "eager"
            if compile_backend is None
            else (f"{compile_backend} ({'full graph' if fullgraph else 'with graph breaks'})")
        )
        fn: Callable[[torch.Tensor], torch.Tensor] = (
            model
            if compile_backend is None
            else torch.compile(model, backend=compile_backend, fullgraph=fullgraph)
        )
        start = time.perf_counter()
        codes: list[str] = []
        try:
            if compile_backend == "inductor":
                # The first step compiles forward and backward: keep their generated code. Both
                # libraries compile with inductor's compute/communication overlap reordering on,
                # as a tensor-parallel training job would: the backward's all_reduce is then
                # issued before the weight gradients' matmuls and waited after them.
                from torch._inductor import config as inductor_config
                from torch._inductor.utils import run_and_get_code

                with inductor_config.patch(OVERLAP):
                    loss, codes = run_and_get_code(_run_step, fn, model, x)
            else:
                loss = _run_step(fn, model, x)
            error = None
        except Exception as e:  # noqa: BLE001 - a failed attempt moves on to the next one
            loss, error = None, _error_text(e)  # type: ignore[assignment]
            traceback.print_exc()
        first_step_s = time.perf_counter() - start
        if agree(error is None):
            info = {"mode": label, "first_step_s": first_step_s, "fallbacks": notes}
            if codes:
                info["inductor_code"] = summarize_collectives(codes)
            return info, fn, loss
        notes.append(f"{label}: {error or 'failed on another rank'}")
    return {"mode": None, "fallbacks": notes, "error": "every attempt failed"}, None, None


def run_step_benchmark(
    ctx: GroupCtx,
    device: torch.device,
    backend: str,
    *,
    iters: int,
    warmup: int,
    block: int,
    barrier: Callable[[], None],
    sync: Callable[[], None],
    agree: Callable[[bool], bool],
) -> dict[str, Any]:
    """One result row: per library the mode that ran, its check, and this rank's step times."""
    problem = make_problem(ctx.world, device)
    w1 = _shard_rows(problem.w1, ctx)
    w2 = _shard_rows(problem.w2.t(), ctx).t()
    libs: dict[str, dict[str, Any]] = {}
    thunks: dict[str, Callable[[], object]] = {}
    for lib in STEP_LIBRARIES:
        model = TPMLP(w1, w2, library_all_reduce(lib, ctx)).to(device)
        x = problem.x.clone().requires_grad_()  # requires grad so that f's backward all_reduce runs
        info, fn, loss = _compile_with_fallback(model, x, backend, agree)
        if fn is not None and loss is not None:
            info["check"] = _check(model, x, loss, problem, ctx)
            thunks[lib] = lambda fn=fn, model=model, x=x: _run_step(fn, model, x)
        libs[lib] = info
    times = (
        measure_interleaved(
            thunks, iters=iters, warmup=warmup, block=block, barrier=barrier, sync=sync
        )
        if thunks
        else {}
    )
    for lib, ts in times.items():
        libs[lib]["times_s"] = ts
    shape = {"batch": BATCH, "d_model": D_MODEL, "d_ff": D_FF // ctx.world * ctx.world}
    return {"backend_requested": backend, "shape": shape, "libraries": libs}
