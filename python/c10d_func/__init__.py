"""c10d_func: traceable, functional collective operators for PyTorch.

`import c10d_func` loads the native library, which registers `torch.ops.c10d_func.*` (CPU, CUDA,
Meta kernels), and connects its group registry to torch.distributed. No process group is needed
to import it or to trace programs that use it.
"""

from __future__ import annotations

import torch  # noqa: F401  (loads libtorch before the native library that links it)

from . import _C, _registry
from ._registry import groups, init, register_group, shutdown, world

_registry.install()

__all__ = ["groups", "init", "register_group", "shutdown", "world"]
