"""c10d_func: traceable, functional collective operators for PyTorch.

`import c10d_func` loads the native library, which registers `torch.ops.c10d_func.*` (CPU, CUDA,
Meta kernels), and connects its group registry to torch.distributed. No process group is needed
to import it or to trace programs that use it.

The package is a drop-in for torch.distributed._functional_collectives: ``import c10d_func as
funcol`` gives the same functions (`all_reduce`, `all_gather_tensor`, …, `wait_tensor`,
`AsyncCollectiveTensor`), plus `gather`, `scatter` and `reduce`; see `c10d_func.functional`.
Point-to-point messages (`isend`, `irecv`, `batch_p2p_ops`) are in `c10d_func.messages`.

Importing it also registers the torch.distributed backend ``"c10d_func"``
(``dist.init_process_group("c10d_func")``), whose groups run on the same transports, and
`split_group` makes many such groups in one call.
"""

from __future__ import annotations

import torch  # noqa: F401  (loads libtorch before the native library that links it)

from . import _C, _backend, _compile, _registry, _torch_patches, functional, messages  # noqa: F401  (loading _C registers torch.ops.c10d_func)
from ._backend import split_group
from ._registry import groups, init, register_group, set_transport, shutdown, world
from .functional import *
from .messages import batch_p2p_ops, irecv, isend
from .symmetric import empty

_registry.install()
_backend.install()
_compile.install()
_torch_patches.install(
    on_default_group_change=_registry.default_group_changed,
    on_group_destroyed=_registry.group_destroyed,
)

__all__ = [
    "batch_p2p_ops",
    "empty",
    "groups",
    "init",
    "irecv",
    "isend",
    "register_group",
    "set_transport",
    "shutdown",
    "split_group",
    "world",
]
__all__ += functional.__all__
