"""Tensors in symmetric host memory: memory every member of a group maps, so collectives read and
write it in place (see docs/symmetric_memory.md).

The outputs of large CPU collectives on the shm transport already live there. `empty` gives one
to a user: a DDP bucket, a tensor-parallel activation buffer, anything that is sent again and
again. Collectives read such a tensor where it lies, with no private copy, so it must not be
written while a collective that reads it is in flight (wait its output first).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import _C
from ._groups import RANK_TYPES, resolve_group

__all__ = ["empty"]


def empty(
    *size: int | Sequence[int],
    group: RANK_TYPES,
    dtype: torch.dtype | None = None,
    tag: str = "",
) -> torch.Tensor:
    """An uninitialised CPU tensor in `group`'s symmetric memory (ordinary memory when the group's
    transport has none, or when C10D_FUNC_SHM_POOL_BYTES leaves no room: counted in
    ``groups()[i]["memory"]["fallbacks"]``).

    Collective: the first call on a group forms its communicator, so every member makes it.
    """
    sizes = list(size[0]) if len(size) == 1 and not isinstance(size[0], int) else list(size)
    if not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ValueError(f"c10d_func.empty: sizes must be non-negative ints, got {sizes}")
    tag, ranks, group_size = resolve_group(group, tag)
    return _C.symmetric_empty(sizes, dtype or torch.get_default_dtype(), tag, ranks, group_size)
