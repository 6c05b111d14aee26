"""c10d_func as a torch.distributed backend, and split_group.

On import the package registers the backend ``"c10d_func"`` for CPU and CUDA, so classic code
reaches c10d_func's transports: ``dist.init_process_group("c10d_func")``,
``"cpu:c10d_func,cuda:nccl"``, ``dist.new_group(ranks, backend="c10d_func")``. The backend is C++
(`backend/`) and runs on the communicators the functional ops use: shm between the processes
of one host, Gloo across hosts, NCCL for CUDA.

`split_group` makes every subgroup of a partition in one call of every member of the parent.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from . import _C, _torch_patches
from ._registry import device_backend

__all__ = ["BACKEND_NAME", "split_group"]

BACKEND_NAME = "c10d_func"

# How many splits each parent group has made, per parent group name: every member of a parent
# calls split_group the same number of times in the same order, so this names each split the
# same way on every member without any communication.
_split_counts: dict[str, int] = {}


def _create_backend(options: Any, backend_options: Any = None) -> Any:
    """The creator torch calls (extended API) for each group of this backend."""
    members = list(options.global_ranks_in_group) or list(range(options.group_size))
    return _C.create_backend(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout.total_seconds(),
        str(options.group_id),
        members,
    )


def install() -> None:
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"]
    )


def _check_split(split_ranks: Any, parent_size: int) -> list[list[int]]:
    if not split_ranks:
        raise ValueError(
            "c10d_func.split_group: argument 'split_ranks' must be a non-empty list of rank lists"
        )
    seen: set[int] = set()
    checked = []
    for part in split_ranks:
        part = [int(r) for r in part]
        if not part:
            raise ValueError("c10d_func.split_group: argument 'split_ranks' holds an empty group")
        for rank in part:
            if not 0 <= rank < parent_size:
                raise ValueError(
                    f"c10d_func.split_group: rank {rank} of 'split_ranks' is not a rank of the "
                    f"parent group (its ranks are 0..{parent_size - 1})"
                )
            if rank in seen:
                raise ValueError(
                    f"c10d_func.split_group: rank {rank} appears twice in 'split_ranks'; the "
                    "groups of a split must be disjoint"
                )
            seen.add(rank)
        checked.append(part)
    return checked


def split_group(
    parent: dist.ProcessGroup | None = None,
    split_ranks: list[list[int]] | None = None,
    timeout: timedelta | None = None,
    group_desc: str | None = None,
) -> dist.ProcessGroup | Any:
    """Splits `parent` (default: the default group) into the disjoint groups `split_ranks`
    (ranks of the parent), as the split_group RFC describes.

    Every member of the parent calls it once with the same `split_ranks`; all subgroups are made
    in that one call: each member forms its own subgroup's CPU communicator with that subgroup's
    members only (one store exchange), and device communicators the parent already has are split
    (one ``ncclCommSplit`` on CUDA). Returns the caller's ProcessGroup (backend ``c10d_func``,
    usable by every torch.distributed collective and by the functional ops, which find the same
    communicators), or ``GroupMember.NON_GROUP_MEMBER`` when the caller is in no subgroup.
    """
    from torch.distributed import distributed_c10d as c10d

    if parent is None:
        parent = c10d._get_default_group()
    if parent == dist.GroupMember.NON_GROUP_MEMBER or not _torch_patches.is_group_of_this_process(
        parent
    ):
        raise ValueError(
            f"c10d_func.split_group: argument 'parent' is not a group of this process ({parent!r})"
        )
    parent_ranks = dist.get_process_group_ranks(parent)
    parts = _check_split(split_ranks, len(parent_ranks))
    if timeout is None:
        timeout = c10d._get_default_timeout(BACKEND_NAME)
    count = _split_counts.get(parent.group_name, 0)
    _split_counts[parent.group_name] = count + 1

    my_parent_rank = dist.get_rank(parent)
    color = next((i for i, part in enumerate(parts) if my_parent_rank in part), -1)
    parent_backend = _parent_backend(parent)
    if color < 0:
        if parent_backend is not None:
            _C.split_backend(parent_backend, None, -1, 0)
        return dist.GroupMember.NON_GROUP_MEMBER

    mine = parts[color]
    global_ranks = [parent_ranks[r] for r in mine]
    digest = hashlib.sha1(
        f"{parent.group_name}/{count}/{mine}".encode(), usedforsecurity=False
    ).hexdigest()[:16]
    name = f"c10d_func_split_{digest}"
    parent_store = _torch_patches.store_of(parent)
    store = dist.PrefixStore(f"{name}/", parent_store)
    rank, size = mine.index(my_parent_rank), len(mine)

    backend = _C.create_backend(
        dist.PrefixStore("cpu/", store), rank, size, timeout.total_seconds(), name, global_ranks
    )
    if parent_backend is not None:
        _C.split_backend(parent_backend, backend, color, rank)

    pg = dist.ProcessGroup(store, rank, size)
    custom = dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(custom)
    for device in ("cpu", "cuda"):
        pg._register_backend(torch.device(device), custom, backend)
    pg._set_group_name(name)
    pg._set_group_desc(group_desc or f"split of {parent.group_desc}")
    _torch_patches.register_group_in_world(
        pg, BACKEND_NAME, name, store, global_ranks, "cpu:c10d_func,cuda:c10d_func"
    )
    return pg


def _parent_backend(parent: dist.ProcessGroup) -> Any:
    """The parent's c10d_func backend (whose device communicators split), or None."""
    for device in ("cuda", "cpu"):
        try:
            backend = device_backend(parent, device)
        except RuntimeError:
            continue
        if _C.is_func_backend(backend):
            return backend
    return None
