"""Connects the native group registry to torch.distributed.

Two things only Python can provide are installed here at import: the default process group as a
world (when one is initialised), and the factory that builds torch's ProcessGroupGloo for a chunk
(torch ships no Gloo headers, so the C++ side cannot construct it directly).
"""

from __future__ import annotations

import atexit
import datetime
import warnings
from typing import Any

import torch
import torch.distributed as dist

from . import _C


def _default_group_world() -> tuple[Any, int, int] | None:
    if not (dist.is_available() and dist.is_initialized()):
        return None
    from torch.distributed.distributed_c10d import _get_default_store

    return _get_default_store(), dist.get_rank(), dist.get_world_size()


def _make_gloo(store: Any, rank: int, size: int, timeout_seconds: float) -> Any:
    return dist.ProcessGroupGloo(store, rank, size, datetime.timedelta(seconds=timeout_seconds))


def _settle_at_exit() -> None:
    """Runs at interpreter exit (atexit): collectives issued and never waited get the timeout to
    finish, so a process that exits right after issuing them neither crashes nor cuts off peers
    that still need its part. One warning says how many there were."""
    unwaited, abandoned = _C.settle_at_exit()
    if unwaited:
        detail = f"; {abandoned} did not finish within C10D_FUNC_TIMEOUT and were abandoned" if abandoned else ", all finished"
        warnings.warn(
            f"c10d_func: {unwaited} collective(s) left unwaited at exit (call wait_tensor on every "
            f"output){detail}",
            RuntimeWarning,
            stacklevel=1,
        )


def install() -> None:
    atexit.register(_settle_at_exit)
    _C.set_world_provider(_default_group_world)
    # torch's ProcessGroupGloo moves CPU tensors, and CUDA tensors through host memory: it is
    # the CPU transport and the alternative CUDA transport (NCCL is the CUDA default).
    for device in ("cpu", "cuda"):
        _C.add_backend_transport(device, "gloo", _make_gloo)


def set_transport(transport: str, device: str = "cuda", tag: str | None = None) -> None:
    """Chooses the transport of `device` tensors: for one tag, or for every tag without a choice.

    CPU: "auto" (default: "shm" when every member of a group is on this host, else "gloo"),
    "shm" or "gloo". CUDA: "nccl" (default, when built with CUDA) or "gloo". The environment
    variables C10D_FUNC_CPU_TRANSPORT and C10D_FUNC_CUDA_TRANSPORT set the defaults without code.
    A transport chosen for a tag also serves groups of one member of that tag, which otherwise
    take a local copy. A group's communicator is made on first use, so choose before a tag's
    first collective.
    """
    _C.select_transport(device, transport, tag or "")


def init(store: dist.Store, rank: int, world_size: int) -> None:
    """Sets the world explicitly: `store` is shared by every process of the job."""
    _C.init(store, rank, world_size)


def _backend_devices(pg: dist.ProcessGroup) -> list[str]:
    devices = []
    for device in ("cpu", "cuda"):
        try:
            pg._get_backend(torch.device(device))
        except RuntimeError:
            continue
        devices.append(device)
    return devices


def register_group(pg: dist.ProcessGroup, tag: str = "") -> None:
    """Binds an existing ProcessGroup so that calls naming its global ranks and `tag` use it.

    Works for any backend the group carries (Gloo, NCCL, third-party); every device the group has
    a backend for is bound. Like torch's `new_group`, every rank may call it: on a rank outside
    the group (which `new_group` hands a non-member sentinel) it does nothing.
    """
    if not isinstance(pg, dist.ProcessGroup):
        if pg == dist.GroupMember.NON_GROUP_MEMBER:
            return
        raise TypeError(f"c10d_func.register_group: argument 'pg' must be a ProcessGroup, got {pg!r}")
    ranks = dist.get_process_group_ranks(pg)
    devices = _backend_devices(pg)
    if not devices:
        raise ValueError(f"c10d_func.register_group: process group {pg} has no cpu or cuda backend")
    for device in devices:
        _C.register_backend(pg._get_backend(torch.device(device)), device, tag, ranks)


def groups() -> list[dict[str, Any]]:
    """The communicators this process holds: device, tag, ranks, rank, backend, origin, failure."""
    return _C.groups()


def world() -> dict[str, Any] | None:
    """The resolved world (rank, world_size, origin), or None before the first collective."""
    return _C.world()


def shutdown() -> None:
    """Waits for pending collectives, then drops every communicator.

    The world stays resolved. Every member of a group must call it before that group is used
    again, since the next call creates the communicator anew. ProcessGroups bound through the
    functional API's `group=` are forgotten too (they are bound again on next use).
    """
    _C.shutdown()
    from . import _groups

    _groups._bound.clear()
