"""c10d_func: traceable, functional collective operators for PyTorch.

`import c10d_func` loads the native library, which registers `torch.ops.c10d_func.*` (CPU, CUDA,
Meta kernels), and connects its group registry to torch.distributed. No process group is needed
to import it or to trace programs that use it.

The package is a drop-in for torch.distributed._functional_collectives: ``import c10d_func as
funcol`` gives the same functions (`all_reduce`, `all_gather_tensor`, …, `wait_tensor`,
`AsyncCollectiveTensor`), plus `gather`, `scatter` and `reduce`; see `c10d_func.functional`.
"""

from __future__ import annotations

import torch  # noqa: F401  (loads libtorch before the native library that links it)

from . import _C, _compile, _registry  # noqa: F401  (loading _C registers torch.ops.c10d_func)
from ._registry import groups, init, register_group, set_transport, shutdown, world
from .functional import (
    RANK_TYPES,
    AsyncCollectiveTensor,
    all_gather_into_tensor_coalesced,
    all_gather_single,
    all_gather_single_autograd,
    all_gather_single_coalesced,
    all_gather_tensor,
    all_gather_tensor_autograd,
    all_reduce,
    all_reduce_coalesced,
    all_to_all_single,
    all_to_all_single_autograd,
    broadcast,
    gather,
    permute_tensor,
    reduce,
    reduce_scatter_single,
    reduce_scatter_single_autograd,
    reduce_scatter_single_coalesced,
    reduce_scatter_tensor,
    reduce_scatter_tensor_autograd,
    reduce_scatter_tensor_coalesced,
    scatter,
    wait_tensor,
)

_registry.install()
_compile.install()

__all__ = [
    "RANK_TYPES",
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
    "broadcast",
    "gather",
    "groups",
    "init",
    "permute_tensor",
    "reduce",
    "reduce_scatter_single",
    "reduce_scatter_single_autograd",
    "reduce_scatter_single_coalesced",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_autograd",
    "reduce_scatter_tensor_coalesced",
    "register_group",
    "scatter",
    "set_transport",
    "shutdown",
    "wait_tensor",
    "world",
]
