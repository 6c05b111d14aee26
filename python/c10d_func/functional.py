"""The functional collectives API: a drop-in for torch.distributed._functional_collectives.

Same names, signatures and semantics, running on `torch.ops.c10d_func.*`; a program written
against torch's module runs unchanged after ``import c10d_func as funcol``. On top of torch's set
there are `gather`, `scatter` and `reduce`.

Every function takes ``group`` (any of the types in `c10d_func._groups`) and ``tag``, returns new
tensors and leaves its inputs unmodified. In eager mode the results are AsyncCollectiveTensors
that wait on first use; while tracing (torch.compile, make_fx, torch.export) an explicit
`wait_tensor` follows each collective instead. ``src``, ``dst`` and ``src_dst`` are indices inside
the group. Every function is differentiable through the ops' Autograd kernels, so the
``*_autograd`` names are aliases. On meta tensors, a group name that no group of this process
has still traces where the output shape needs no group size (`c10d_func._groups.meta_stand_in`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch.distributed import _functional_collectives as _torch_funcol

from ._async import AsyncCollectiveTensor, wait_tensor, wait_tensors, wrap_output
from ._groups import (
    RANK_TYPES,
    GroupNotFoundError,
    meta_stand_in,
    resolve_group,
    size_unknown_error,
)

__all__ = [
    "RANK_TYPES",
    "REDUCE_OP_TO_STR",
    "ArgumentError",
    "AsyncCollectiveTensor",
    "all_gather_into_tensor_coalesced",
    "all_gather_single",
    "all_gather_single_autograd",
    "all_gather_single_coalesced",
    "all_gather_tensor",
    "all_gather_tensor_autograd",
    "all_reduce",
    "all_reduce_coalesced",
    "all_to_all_single",
    "all_to_all_single_autograd",
    "allow_inflight_collective_as_graph_input_ctx",
    "broadcast",
    "gather",
    "permute_tensor",
    "reduce",
    "reduce_scatter_single",
    "reduce_scatter_single_autograd",
    "reduce_scatter_single_coalesced",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_autograd",
    "reduce_scatter_tensor_coalesced",
    "scatter",
    "wait_tensor",
    "wait_tensors",
]

_ops = torch.ops.c10d_func

# torch's module's own helpers, the same objects: code that takes them from torch's module finds
# them here. The context manager sets torch's switch, which c10d_func's waits honour as torch's
# do (an in-flight classic collective waited inside a compiled region).
REDUCE_OP_TO_STR = _torch_funcol.REDUCE_OP_TO_STR
allow_inflight_collective_as_graph_input_ctx = (
    _torch_funcol.allow_inflight_collective_as_graph_input_ctx
)


class ArgumentError(ValueError, AssertionError):
    """A bad argument of a function of this module (a size the group does not divide,
    `scatter_dim` of another length than the inputs, a 0-d tensor to scatter): a ValueError, and
    an AssertionError, as torch's module raises for the same checks."""


_F = TypeVar("_F", bound=Callable[..., Any])

# Our names whose counterpart an older torch spells differently.
_TORCH_NAMES = {
    "all_gather_single": "all_gather_tensor",
    "reduce_scatter_single": "reduce_scatter_tensor",
    "all_gather_single_coalesced": "all_gather_into_tensor_coalesced",
    "reduce_scatter_single_coalesced": "reduce_scatter_tensor_coalesced",
}


_LOCAL_TENSOR_MODULE = "torch.distributed._local_tensor"


def _simulated_by_torch_under_local_tensor_mode(fn: _F) -> _F:
    """Under torch's LocalTensorMode every rank is simulated in one process and the mode knows
    how to run torch's functional collectives across the simulated ranks (c10d_func's ops it
    would run once per rank, each on its own): there the call goes to torch's function of the
    same name. gather, scatter and reduce have none and raise."""
    name = fn.__name__

    @functools.wraps(fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        # Inline, not a helper: this runs on every eager call (about 0.3 µs). The mode's module
        # is only looked at once something imported it.
        local = None if torch.compiler.is_compiling() else sys.modules.get(_LOCAL_TENSOR_MODULE)
        if local is not None and local.enabled_local_tensor_mode() is not None:
            from torch.distributed import _functional_collectives as torch_funcol

            torch_fn = getattr(torch_funcol, name, None) or getattr(
                torch_funcol, _TORCH_NAMES.get(name, name), None
            )
            if torch_fn is None:
                raise NotImplementedError(
                    f"c10d_func.{name}: not available under LocalTensorMode, which simulates "
                    "only torch's functional collectives, and torch has no such function"
                )
            return torch_fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return dispatch  # type: ignore[return-value]


def _resolve(
    group: RANK_TYPES,
    tag: str,
    inputs: list[torch.Tensor],
    op: str = "",
    meta_group_size: int | None = None,
) -> tuple[str, list[int], int]:
    """`resolve_group`, and for a group name that no group of this process has: on meta tensors,
    a stand-in group of `meta_group_size` members where the op's output shape needs no group size
    (`_groups.meta_stand_in`), else an error saying why `op` cannot trace without it."""
    try:
        return resolve_group(group, tag)
    except GroupNotFoundError as missing:
        if meta_group_size is None:
            raise size_unknown_error(missing, op, inputs)
        return meta_stand_in(missing, inputs, meta_group_size)


def _checked_dim(dim: int, ndim: int, arg: str, fn: str) -> int:
    """`dim` wrapped into [0, ndim) as torch wraps dims, or IndexError naming the argument (a
    0-d tensor takes dims as a 1-d one does, as torch's own ops do)."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(
            f"c10d_func.{fn}: argument '{arg}' is out of range (expected to be in range of "
            f"[{-rank}, {rank - 1}], but got {dim})"
        )
    return dim % rank


def _gathered_to_dim(gathered: torch.Tensor, group_size: int, dim: int) -> torch.Tensor:
    """Turns an all_gather output [group_size*d0, ...] (blocks stacked on dim 0) into the blocks
    concatenated along `dim` (already checked and wrapped)."""
    if dim == 0:
        return gathered
    # [g*d0, ..., dk, ...] -> [g, d0, ..., dk, ...] -> [d0, ..., g, dk, ...] -> [d0, ..., g*dk, ...]
    # The first two steps are views, so a pending output stays pending until the final reshape.
    blocks = gathered.unflatten(0, (group_size, gathered.size(0) // group_size))
    return blocks.movedim(0, dim).flatten(dim, dim + 1)


def _blocks_from_dim(
    tensor: torch.Tensor, group_size: int, scatter_dim: int, fn: str
) -> torch.Tensor:
    """The reduce_scatter input whose dim-0 blocks are `tensor`'s chunks along `scatter_dim`."""
    if tensor.dim() == 0:
        raise ArgumentError(f"c10d_func.{fn}: a 0-d tensor cannot be scattered")
    dim = _checked_dim(scatter_dim, tensor.dim(), "scatter_dim", fn)
    if tensor.size(dim) % group_size != 0:
        raise ArgumentError(
            f"c10d_func.{fn}: input dimension {scatter_dim} (size {tensor.size(dim)}) must be a "
            f"multiple of the group size {group_size}"
        )
    if dim == 0:
        return tensor
    # [..., g*c, ...] -> [..., g, c, ...] -> [g, ..., c, ...] -> [g*d0, ..., c, ...]
    blocks = tensor.unflatten(dim, (group_size, tensor.size(dim) // group_size))
    return blocks.movedim(dim, 0).flatten(0, 1)


@_simulated_by_torch_under_local_tensor_mode
def all_reduce(self: torch.Tensor, reduceOp: str, group: RANK_TYPES, tag: str = "") -> torch.Tensor:
    """Reduces `self` across the group; every member gets the result.

    Args:
        self: this rank's contribution.
        reduceOp: sum, avg, product, min, max, band, bor or bxor (any case).
        group: the group (see the module docstring); tag: selects an independent communicator.
    """
    tag, ranks, group_size = _resolve(group, tag, [self], meta_group_size=1)
    return wrap_output(_ops.all_reduce(self, reduceOp.lower(), tag, ranks, group_size))


@_simulated_by_torch_under_local_tensor_mode
def all_gather_single(
    self: torch.Tensor, gather_dim: int, group: RANK_TYPES, tag: str = ""
) -> torch.Tensor:
    """Gathers every member's `self` and concatenates them, in group order, along `gather_dim`.

    A 0-d input gives a 1-D result of group_size elements.
    """
    dim = _checked_dim(gather_dim, self.dim(), "gather_dim", "all_gather_tensor")
    tag, ranks, group_size = _resolve(group, tag, [self], op="all_gather_tensor")
    gathered = wrap_output(_ops.all_gather_into_tensor(self, tag, ranks, group_size))
    return _gathered_to_dim(gathered, group_size, dim)


@_simulated_by_torch_under_local_tensor_mode
def reduce_scatter_single(
    self: torch.Tensor, reduceOp: str, scatter_dim: int, group: RANK_TYPES, tag: str = ""
) -> torch.Tensor:
    """Reduces `self` across the group and gives member i the i-th chunk along `scatter_dim`.

    `self.size(scatter_dim)` must be a multiple of the group size.
    """
    tag, ranks, group_size = _resolve(group, tag, [self], op="reduce_scatter_tensor")
    blocks = _blocks_from_dim(self, group_size, scatter_dim, "reduce_scatter_tensor")
    return wrap_output(_ops.reduce_scatter_tensor(blocks, reduceOp.lower(), tag, ranks, group_size))


@_simulated_by_torch_under_local_tensor_mode
def all_reduce_coalesced(
    self: list[torch.Tensor], reduceOp: str, group: RANK_TYPES, tag: str = ""
) -> list[torch.Tensor]:
    """`all_reduce` of every tensor of the list, issued as one collective."""
    # The dispatcher cannot pick a kernel for an empty Tensor[] (no tensor, no device).
    if not self:
        return []
    tag, ranks, group_size = _resolve(group, tag, self, meta_group_size=1)
    outputs = _ops.all_reduce_coalesced(self, reduceOp.lower(), tag, ranks, group_size)
    return [wrap_output(t) for t in outputs]


@_simulated_by_torch_under_local_tensor_mode
def all_gather_single_coalesced(
    self: list[torch.Tensor], group: RANK_TYPES, tag: str = ""
) -> list[torch.Tensor]:
    """All-gather (on dim 0) of every tensor of the list, issued as one collective."""
    if not self:
        return []
    tag, ranks, group_size = _resolve(group, tag, self, op="all_gather_into_tensor_coalesced")
    outputs = _ops.all_gather_into_tensor_coalesced(self, tag, ranks, group_size)
    return [wrap_output(t) for t in outputs]


@_simulated_by_torch_under_local_tensor_mode
def reduce_scatter_single_coalesced(
    inputs: list[torch.Tensor],
    reduceOp: str,
    scatter_dim: list[int],
    group: RANK_TYPES,
    tag: str = "",
) -> list[torch.Tensor]:
    """`reduce_scatter_tensor` of every tensor of the list (each along its own scatter_dim),
    issued as one collective. The input list is not modified."""
    if len(scatter_dim) != len(inputs):
        raise ArgumentError(
            f"c10d_func.reduce_scatter_tensor_coalesced: scatter_dim has {len(scatter_dim)} "
            f"entries for {len(inputs)} inputs"
        )
    if not inputs:
        return []
    tag, ranks, group_size = _resolve(group, tag, inputs, op="reduce_scatter_tensor_coalesced")
    blocks = [
        _blocks_from_dim(t, group_size, d, "reduce_scatter_tensor_coalesced")
        for t, d in zip(inputs, scatter_dim)
    ]
    outputs = _ops.reduce_scatter_tensor_coalesced(blocks, reduceOp.lower(), tag, ranks, group_size)
    return [wrap_output(t) for t in outputs]


@_simulated_by_torch_under_local_tensor_mode
def all_to_all_single(
    self: torch.Tensor,
    output_split_sizes: list[int] | None,
    input_split_sizes: list[int] | None,
    group: RANK_TYPES,
    tag: str = "",
) -> torch.Tensor:
    """Sends the i-th dim-0 split of `self` to member i; returns what each member sent here,
    concatenated in group order.

    Both split lists name dim-0 sizes per member; both None splits dim 0 evenly.
    """
    if (output_split_sizes is None) != (input_split_sizes is None):
        raise ArgumentError(
            "c10d_func.all_to_all_single: output_split_sizes and input_split_sizes must both be "
            "given or both be None"
        )
    tag, ranks, group_size = _resolve(
        group,
        tag,
        [self],
        meta_group_size=1 if output_split_sizes is None else len(output_split_sizes),
    )
    return wrap_output(
        _ops.all_to_all_single(self, output_split_sizes, input_split_sizes, tag, ranks, group_size)
    )


@_simulated_by_torch_under_local_tensor_mode
def broadcast(self: torch.Tensor, src: int, group: RANK_TYPES, tag: str = "") -> torch.Tensor:
    """Every member gets member `src`'s `self` (`src` is an index inside the group)."""
    tag, ranks, group_size = _resolve(group, tag, [self], meta_group_size=src + 1)
    return wrap_output(_ops.broadcast(self, src, tag, ranks, group_size))


@_simulated_by_torch_under_local_tensor_mode
def permute_tensor(
    self: torch.Tensor, src_dst: list[int], group: RANK_TYPES, tag: str = ""
) -> torch.Tensor:
    """Member m sends `self` to member `src_dst[m]` (a permutation of the group's indices) and
    returns what it received."""
    tag, ranks, group_size = _resolve(group, tag, [self], meta_group_size=len(src_dst))
    return wrap_output(_ops.permute(self, list(src_dst), tag, ranks, group_size))


@_simulated_by_torch_under_local_tensor_mode
def reduce(
    self: torch.Tensor, reduceOp: str, dst: int, group: RANK_TYPES, tag: str = ""
) -> torch.Tensor:
    """Reduces `self` across the group onto member `dst`; other members get zeros of the same
    shape."""
    tag, ranks, group_size = _resolve(group, tag, [self], meta_group_size=dst + 1)
    return wrap_output(_ops.reduce(self, reduceOp.lower(), dst, tag, ranks, group_size))


@_simulated_by_torch_under_local_tensor_mode
def gather(self: torch.Tensor, dst: int, group: RANK_TYPES, tag: str = "") -> torch.Tensor:
    """Concatenates every member's `self` on dim 0, in group order, on member `dst`.

    Every member gets a [group_size*d0, ...] tensor; it is zeros except on `dst`.
    """
    tag, ranks, group_size = _resolve(group, tag, [self], op="gather")
    return wrap_output(_ops.gather(self, dst, tag, ranks, group_size))


@_simulated_by_torch_under_local_tensor_mode
def scatter(self: torch.Tensor, src: int, group: RANK_TYPES, tag: str = "") -> torch.Tensor:
    """Member i gets the i-th dim-0 chunk of member `src`'s `self` ([group_size*d0, ...] ->
    [d0, ...]). Every member passes a tensor of that shape; only `src`'s is read."""
    tag, ranks, group_size = _resolve(group, tag, [self], op="scatter")
    return wrap_output(_ops.scatter(self, src, tag, ranks, group_size))


# torch names the same functions twice: the *_tensor names predate the *_single ones (torch now
# warns on them; here both are first-class), and the *_autograd names predate autograd support
# in the plain ones. They are the same functions, so either spelling traces to the same graph.
all_gather_tensor = all_gather_single
reduce_scatter_tensor = reduce_scatter_single
all_gather_into_tensor_coalesced = all_gather_single_coalesced
reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced
all_gather_single_autograd = all_gather_single
all_gather_tensor_autograd = all_gather_single
reduce_scatter_single_autograd = reduce_scatter_single
reduce_scatter_tensor_autograd = reduce_scatter_single
all_to_all_single_autograd = all_to_all_single
