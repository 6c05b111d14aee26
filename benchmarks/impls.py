"""The comparison table: which collectives are measured and how each implementation calls them.

Everything that differs between implementations lives here, as one builder per implementation that
returns a callable per op; the correctness check, the timing loop and the reports only ever see
`Collective` callables and never branch on the implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

Collective = Callable[[torch.Tensor], torch.Tensor]  # input -> finished (waited) output

C10D_FUNC = "c10d_func"
FRONTEND = "c10d_func (python frontend)"
C10D_FUNC_GLOO = "c10d_func on gloo"
TORCH_NATIVE = "torch native"
TORCH_DIST = "torch.distributed"
# The same classic calls on a group of the c10d_func backend (dist.new_group(backend="c10d_func")):
# beside TORCH_DIST (the default group: Gloo on CPU, NCCL on CUDA), what classic code gains.
DIST_ON_C10D_FUNC = "torch.distributed on c10d_func"
IMPL_NAMES = [C10D_FUNC, FRONTEND, C10D_FUNC_GLOO, TORCH_NATIVE, TORCH_DIST, DIST_ON_C10D_FUNC]
# c10d_func's own ops pinned to Gloo (CPU): beside the default column (shm on one host), the
# speed-up of the transport alone.
GLOO_TAG = "bench-on-gloo"

REDUCE_OP = "sum"


@dataclass(frozen=True)
class GroupCtx:
    """The one group every implementation runs on: the whole world, as the default process group."""

    rank: int
    world: int
    group: dist.ProcessGroup
    src: int = 0  # broadcast root, an index inside the group (== global rank for the world group)
    # c10d_func's tag: "" runs on the library's default transport; the runner pins a transport
    # (--transport) with a tag of its own, which also holds for a world of one rank.
    tag: str = ""

    @property
    def ranks(self) -> list[int]:
        return list(range(self.world))

    @property
    def group_name(self) -> str:
        return self.group.group_name


@dataclass(frozen=True)
class OpSpec:
    """How an op sizes its input and converts time to nccl-tests bandwidth."""

    name: str
    busbw_factor: Callable[[int], float]  # world -> factor
    nccl_bytes: Callable[[int, int], int]  # (per-rank input bytes, world) -> nccl-tests "size"
    splits_input: bool  # input is cut into `world` equal chunks along dim 0


OPS: dict[str, OpSpec] = {
    "all_reduce": OpSpec("all_reduce", lambda n: 2 * (n - 1) / n, lambda b, n: b, False),
    # nccl-tests counts the gathered output for all_gather and the full input for reduce_scatter.
    "all_gather": OpSpec("all_gather", lambda n: (n - 1) / n, lambda b, n: b * n, False),
    "reduce_scatter": OpSpec("reduce_scatter", lambda n: (n - 1) / n, lambda b, n: b, True),
    "all_to_all": OpSpec("all_to_all", lambda n: (n - 1) / n, lambda b, n: b, True),
    "broadcast": OpSpec("broadcast", lambda n: 1.0, lambda b, n: b, False),
}

ELEMENT = torch.float32
ELEMENT_BYTES = 4


def input_numel(op: str, nbytes: int, world: int) -> int:
    """Elements of the per-rank input for a nominal size; split ops round to a multiple of world."""
    numel = max(1, nbytes // ELEMENT_BYTES)
    if OPS[op].splits_input:
        # nccl-tests rounds the count down the same way; at least one element per rank.
        numel = max(world, numel // world * world)
    return numel


def _even_splits(x: torch.Tensor, world: int) -> list[int]:
    return [x.shape[0] // world] * world


def _c10d_func(ctx: GroupCtx, tag: str | None = None) -> dict[str, Collective]:
    ops = torch.ops.c10d_func
    wait = ops.wait_tensor
    tag, ranks, n = ctx.tag if tag is None else tag, ctx.ranks, ctx.world
    return {
        "all_reduce": lambda x: wait(ops.all_reduce(x, REDUCE_OP, tag, ranks, n)),
        "all_gather": lambda x: wait(ops.all_gather_into_tensor(x, tag, ranks, n)),
        "reduce_scatter": lambda x: wait(ops.reduce_scatter_tensor(x, REDUCE_OP, tag, ranks, n)),
        "all_to_all": lambda x: wait(ops.all_to_all_single(x, None, None, tag, ranks, n)),
        "broadcast": lambda x: wait(ops.broadcast(x, ctx.src, tag, ranks, n)),
    }


def _c10d_func_gloo(ctx: GroupCtx) -> dict[str, Collective]:
    import c10d_func

    c10d_func.set_transport("gloo", "cpu", tag=GLOO_TAG)
    return _c10d_func(ctx, GLOO_TAG)


def _frontend_wait(out: Any) -> torch.Tensor:
    # torch's funcol returns an AsyncCollectiveTensor that is finished with .wait(); a frontend
    # returning a plain tensor is finished with the op-level wait_tensor.
    if hasattr(out, "wait"):
        return out.wait()
    return torch.ops.c10d_func.wait_tensor(out)


# Frontend function names and argument orders mirror torch.distributed._functional_collectives,
# of which the frontend is meant to be a drop-in replacement.
_FrontendCall = Callable[[Callable[..., Any], torch.Tensor, GroupCtx], Any]  # (fn, input, ctx)
_FRONTEND_CALLS: dict[str, tuple[str, _FrontendCall]] = {
    "all_reduce": ("all_reduce", lambda f, x, c: f(x, REDUCE_OP, c.ranks, c.tag)),
    "all_gather": ("all_gather_tensor", lambda f, x, c: f(x, 0, c.ranks, c.tag)),
    "reduce_scatter": ("reduce_scatter_tensor", lambda f, x, c: f(x, REDUCE_OP, 0, c.ranks, c.tag)),
    "all_to_all": ("all_to_all_single", lambda f, x, c: f(x, None, None, c.ranks, c.tag)),
    "broadcast": ("broadcast", lambda f, x, c: f(x, c.src, c.ranks, c.tag)),
}


def frontend_missing() -> str | None:
    """None when the Python frontend is importable, else why its column is empty."""
    import c10d_func

    if not hasattr(c10d_func, "all_reduce"):
        return "c10d_func has no Python frontend yet (no c10d_func.all_reduce): column skipped"
    return None


def _frontend(ctx: GroupCtx) -> dict[str, Collective]:
    import c10d_func

    table: dict[str, Collective] = {}
    for op, (name, call) in _FRONTEND_CALLS.items():
        fn = getattr(c10d_func, name, None)
        if fn is not None:  # an op the frontend lacks is reported as unavailable, not as a failure
            table[op] = lambda x, fn=fn, call=call: _frontend_wait(call(fn, x, ctx))
    return table


def _torch_native(ctx: GroupCtx) -> dict[str, Collective]:
    ops = torch.ops._c10d_functional
    wait = ops.wait_tensor
    g, n = ctx.group_name, ctx.world
    return {
        "all_reduce": lambda x: wait(ops.all_reduce(x, REDUCE_OP, g)),
        "all_gather": lambda x: wait(ops.all_gather_into_tensor(x, n, g)),
        "reduce_scatter": lambda x: wait(ops.reduce_scatter_tensor(x, REDUCE_OP, n, g)),
        "all_to_all": lambda x: wait(
            ops.all_to_all_single(x, _even_splits(x, n), _even_splits(x, n), g)
        ),
        "broadcast": lambda x: wait(ops.broadcast(x, ctx.src, g)),
    }


def _torch_distributed(
    ctx: GroupCtx, group: dist.ProcessGroup | None = None
) -> dict[str, Collective]:
    # The classic API works in place or into a given output: allocating the output (or cloning the
    # input for the in-place ops) inside the call matches what the functional ops do internally.
    g, n = group or ctx.group, ctx.world

    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=g)
        return out

    def all_gather(x: torch.Tensor) -> torch.Tensor:
        out = x.new_empty((x.shape[0] * n, *x.shape[1:]))
        dist.all_gather_into_tensor(out, x, group=g)
        return out

    def reduce_scatter(x: torch.Tensor) -> torch.Tensor:
        out = x.new_empty((x.shape[0] // n, *x.shape[1:]))
        dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.SUM, group=g)
        return out

    def all_to_all(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, group=g)
        return out

    def broadcast(x: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        dist.broadcast(out, src=dist.get_global_rank(g, ctx.src), group=g)
        return out

    return {
        "all_reduce": all_reduce,
        "all_gather": all_gather,
        "reduce_scatter": reduce_scatter,
        "all_to_all": all_to_all,
        "broadcast": broadcast,
    }


_c10d_func_backend_group: list[dist.ProcessGroup] = []


def dist_on_c10d_func_group() -> dist.ProcessGroup:
    """A group of backend c10d_func spanning the world, made once per process. Every rank builds
    the implementations in the same order, so every rank makes it at the same point."""
    if not _c10d_func_backend_group:
        import c10d_func  # noqa: F401  (registers the backend)

        _c10d_func_backend_group.append(dist.new_group(backend="c10d_func"))
    return _c10d_func_backend_group[0]


def _dist_on_c10d_func(ctx: GroupCtx) -> dict[str, Collective]:
    return _torch_distributed(ctx, dist_on_c10d_func_group())


BUILDERS: dict[str, Callable[[GroupCtx], dict[str, Collective]]] = {
    C10D_FUNC: _c10d_func,
    FRONTEND: _frontend,
    C10D_FUNC_GLOO: _c10d_func_gloo,
    TORCH_NATIVE: _torch_native,
    TORCH_DIST: _torch_distributed,
    DIST_ON_C10D_FUNC: _dist_on_c10d_func,
}


def missing_reason(impl: str, device: str = "cpu") -> str | None:
    """None when `impl` can run in this process, else the note the reports show instead."""
    if impl == C10D_FUNC_GLOO and device != "cpu":
        return "the gloo column is measured on CPU only"
    return frontend_missing() if impl == FRONTEND else None
