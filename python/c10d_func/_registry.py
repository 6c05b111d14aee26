"""Connects the native group registry to torch.distributed.

Two things only Python can provide are installed here at import: the default process group as a
world (when one is initialised), and the factory that builds torch's ProcessGroupGloo for a chunk
(torch ships no Gloo headers, so the C++ side cannot construct it directly).
"""

from __future__ import annotations

import atexit
import datetime
import threading
import warnings
from typing import Any

import torch
import torch.distributed as dist

from . import _C, _python_groups
from ._torch_patches import world_is_per_thread

# Default groups whose world c10d_func must not rendezvous in: its ranks are threads of one
# process, or it is fake (no peers exist).
_DELEGATING_BACKENDS = frozenset({"threaded", "fake"})


def _delegates(pg: dist.ProcessGroup) -> bool:
    """Whether collectives of this default group's world must run on torch's own groups."""
    if world_is_per_thread() or type(pg) is not dist.ProcessGroup:
        return True  # threads as ranks, or a default group written in Python
    try:
        return dist.get_backend(pg) in _DELEGATING_BACKENDS
    except (RuntimeError, ValueError):
        return True


def _default_group_world() -> tuple[Any, int, int, bool, bool] | None:
    if not (dist.is_available() and dist.is_initialized()):
        return None
    from torch.distributed.distributed_c10d import _get_default_group, _get_default_store

    pg = _get_default_group()
    # The group's own rank, not dist.get_rank(): LocalTensorMode patches that to a symbolic
    # value standing for every simulated rank at once.
    return _get_default_store(), pg.rank(), pg.size(), _delegates(pg), world_is_per_thread()


def _process_group_named(name: str) -> dist.ProcessGroup | None:
    from torch.distributed.distributed_c10d import _resolve_process_group

    try:
        return _resolve_process_group(name)
    except (RuntimeError, ValueError, KeyError):
        return None


def _torch_group_of_chunk(tag: str, ranks: list[int], group_size: int) -> dist.ProcessGroup | None:
    """torch's group of the caller's chunk of `ranks`: an existing one (as torch's functional
    collectives find it), else a new one made by the chunk's members alone, so each chunk of a
    partition forms independently."""
    from torch.distributed.distributed_c10d import _find_pg_by_ranks_and_tag, _get_default_group

    me = _get_default_group().rank()
    chunks = [ranks[i : i + group_size] for i in range(0, len(ranks), group_size)]
    mine = next((chunk for chunk in chunks if me in chunk), None)
    if mine is None or list(mine) != sorted(mine):
        return None  # torch's groups list their ranks in order; the caller explains
    pg = _find_pg_by_ranks_and_tag(tag, list(mine))
    if pg is None:
        pg = dist.new_group(list(mine), use_local_synchronization=True)
    return pg


def _bind_on_first_use(
    op: str, device: str, tag: str, ranks: list[int], group_size: int, delegated: bool
) -> bool:
    """Called by the registry for a group that has no communicator yet. A `ptd:<name>` tag is
    the torch group of that name where it exists here (an exported or compiled graph running in
    another process or thread finds that process's or thread's group); any other non-empty tag
    is torch's group made with that `pg_tag` for the caller's chunk, where one exists here (as
    torch's `_find_pg_by_ranks_and_tag` finds it; the tag graphs hold for such a group); in a
    delegated world any other group is torch's group of those ranks, found or created as torch's
    own functional collectives do. Binds it for `tag` and says whether it did. A tag that no
    torch group carries, in a world of c10d_func's own, only names an independent communicator:
    not bound here."""
    pg = None
    if tag.startswith("ptd:"):
        pg = _process_group_named(tag[len("ptd:") :])
    elif tag and dist.is_available() and dist.is_initialized():
        from torch.distributed.distributed_c10d import _find_pg_by_ranks_and_tag, _get_default_group

        me = _get_default_group().rank()
        chunks = [ranks[i : i + group_size] for i in range(0, len(ranks), group_size)]
        mine = next((list(chunk) for chunk in chunks if me in chunk), None)
        found = _find_pg_by_ranks_and_tag(tag, mine) if mine is not None else None
        # torch matches the ranks as a set; the chunk's order is its members' group order, so
        # only a group listing them in that order serves it.
        if found is not None and dist.get_process_group_ranks(found) == mine:
            pg = found
    if pg is None and delegated:
        pg = _torch_group_of_chunk(tag, ranks, group_size)
    if not isinstance(pg, dist.ProcessGroup):
        return False
    bind(pg, tag, dist.get_process_group_ranks(pg))
    return True


# world scope -> (tag, ranks) -> the ProcessGroup bound to it (by register_group, or on first
# use), so each group is registered once per world and let go when torch destroys it. The scope
# is 0 for the process, the thread's id where ranks are threads (each thread has a world, and a
# registry scope, of its own). Holding the group keeps the identity check meaningful (ids are
# never reused) until group_destroyed drops it.
_bound: dict[int, dict[tuple[str, tuple[int, ...]], dist.ProcessGroup]] = {}


def _scope(per_thread: bool) -> int:
    return threading.get_ident() if per_thread else 0


def forget_bound(per_thread: bool) -> None:
    """The world of the calling thread (or process) changed: its bindings are gone."""
    _bound.pop(_scope(per_thread), None)


def bind(pg: dist.ProcessGroup, tag: str, ranks: list[int]) -> None:
    """Registers `pg` for (`tag`, `ranks`) in the calling thread's world, once."""
    bound = _bound.get(_scope(world_is_per_thread()), {})
    if bound.get((tag, tuple(ranks))) is pg:
        return
    register_group(pg, tag)


def group_destroyed(name: str) -> None:
    """torch destroyed the group named `name` (destroy_process_group, _torch_patches.py): every
    binding of it goes from the registry and from `_bound`, which would otherwise keep it (and
    its backends' sockets and threads) alive; a later call naming one of its tags forms or binds
    afresh. A group of backend "c10d_func" has already dropped its communicators (its shutdown).
    The message channels of its `ptd:<name>` tag (c10d_func.isend/irecv with the group) go too."""
    _C.forget_message_routes(f"ptd:{name}")
    bound = _bound.get(_scope(world_is_per_thread()))
    if not bound:
        return
    for (tag, ranks), pg in list(bound.items()):
        if _name_of(pg) == name:
            del bound[(tag, ranks)]
            _C.unbind_group(tag, list(ranks))


def _name_of(pg: dist.ProcessGroup) -> str | None:
    try:
        return pg.group_name
    except (RuntimeError, AttributeError):
        return None  # a ProcessGroup written in Python may have none


def default_group_changed(pg: dist.ProcessGroup | None) -> None:
    """Keeps the registry following torch.distributed's default group; runs after torch's own
    `_update_default_pg` (init_process_group, destroy_process_group; _torch_patches.py), in the
    thread whose world changed (every thread, under the threaded harness)."""
    per_thread = world_is_per_thread()
    forget_bound(per_thread)
    _C.world_changed(per_thread, pg is not None)


def _make_gloo(store: Any, rank: int, size: int, timeout_seconds: float) -> Any:
    return dist.ProcessGroupGloo(store, rank, size, datetime.timedelta(seconds=timeout_seconds))


def _settle_at_exit() -> None:
    """Runs at interpreter exit (atexit): collectives issued and never waited get the timeout to
    finish, so a process that exits right after issuing them neither crashes nor cuts off peers
    that still need its part. One warning says how many there were."""
    unwaited, abandoned = _C.settle_at_exit()
    if unwaited:
        detail = (
            f"; {abandoned} did not finish within C10D_FUNC_TIMEOUT and were abandoned"
            if abandoned
            else ", all finished"
        )
        warnings.warn(
            f"c10d_func: {unwaited} collective(s) left unwaited at exit (call wait_tensor on every "
            f"output){detail}",
            RuntimeWarning,
            stacklevel=1,
        )


def install() -> None:
    atexit.register(_settle_at_exit)
    _C.set_world_provider(_default_group_world)
    _C.set_group_binder(_bind_on_first_use)
    # torch's ProcessGroupGloo moves CPU tensors, and CUDA tensors through host memory: it is
    # the CPU transport across hosts and the alternative CUDA transport (NCCL is the CUDA
    # default). The library makes it in C++ when built with Gloo's headers; otherwise torch's
    # Python constructor does.
    if not _C.has_native_gloo():
        for device in ("cpu", "cuda"):
            _C.add_backend_transport(device, "gloo", _make_gloo)


def set_transport(transport: str, device: str = "cuda", tag: str | None = None) -> None:
    """Chooses the transport of `device` tensors: for one tag, or for every tag without a choice.

    CPU: "auto" (default: "shm" when every member of a group is on this host, else "gloo"),
    "shm" or "gloo". CUDA: "nccl" (default, when built with CUDA) or "gloo". The environment
    variables C10D_FUNC_CPU_TRANSPORT and C10D_FUNC_CUDA_TRANSPORT set the defaults without code.
    A transport chosen for a tag also serves groups of one member of that tag, which otherwise
    take a local copy. A group's communicator is made on first use and keeps its transport, so
    choose before a tag's first collective: choosing another transport for a tag whose groups
    already formed raises RuntimeError (after `shutdown()` on every member they form again), as
    does a name the device has no transport of. Without a tag, the choice is the default for
    the groups of tags with no choice of their own that form afterwards; groups already formed
    keep theirs (`groups()` says which).
    """
    _C.select_transport(device, transport, tag or "")


def init(store: dist.Store, rank: int, world_size: int) -> None:
    """Sets the world explicitly: `store` is shared by every process of the job."""
    _C.init(store, rank, world_size)


def device_backend(pg: dist.ProcessGroup, device: str) -> Any:
    """`pg`'s backend for `device`, unwrapped where it is a c10d_func backend that
    TORCH_DISTRIBUTED_DEBUG=DETAIL wrapped in torch's ProcessGroupWrapper: functional calls then
    run on its communicators as without DETAIL (the wrapper's check is for classic calls, and
    c10d_func's own DETAIL comparison covers them), and split_group splits them. Another
    backend's wrapper stays: functional calls go through it, as torch's functional collectives
    do. Raises RuntimeError where `pg` has no backend for `device`."""
    backend = pg._get_backend(torch.device(device))
    inner = getattr(backend, "wrapped_pg", None)
    return inner if inner is not None and _C.is_func_backend(inner) else backend


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

    Works for any ProcessGroup. One carrying C++ backends (Gloo, NCCL, c10d_func, third-party)
    is bound per device through them; any other (a subclass written in Python, such as torch's
    threaded test group or a `Backend.register_backend` plugin, or a fake group) is called
    through its own methods, as torch's functional collectives call it. Like torch's
    `new_group`, every rank may call it: on a rank outside the group (which `new_group` hands a
    non-member sentinel) it does nothing.
    """
    if not isinstance(pg, dist.ProcessGroup):
        if pg == dist.GroupMember.NON_GROUP_MEMBER:
            return
        raise TypeError(
            f"c10d_func.register_group: argument 'pg' must be a ProcessGroup, got {pg!r}"
        )
    ranks = dist.get_process_group_ranks(pg)
    _register_with_registry(pg, tag, ranks)
    # Remembered for the group's end (group_destroyed) and for bind's check.
    _bound.setdefault(_scope(world_is_per_thread()), {})[(tag, tuple(ranks))] = pg


def _register_with_registry(pg: dist.ProcessGroup, tag: str, ranks: list[int]) -> None:
    if _python_groups.is_python_group(pg):
        # Its methods are the way in: they serve whatever device its tensors are on.
        has_reduce, has_reduce_scatter = _python_groups.traits(pg)
        name = f"{type(pg).__name__} (Python)"
        for device in ("cpu", "cuda"):
            _C.register_python_group(
                pg,
                _python_groups.call_group_method,
                device,
                tag,
                ranks,
                pg.rank(),
                name,
                has_reduce,
                has_reduce_scatter,
            )
        return
    devices = _backend_devices(pg)
    if not devices:
        raise ValueError(f"c10d_func.register_group: process group {pg} has no cpu or cuda backend")
    for device in devices:
        _C.register_backend(device_backend(pg, device), device, tag, ranks)


def groups() -> list[dict[str, Any]]:
    """The communicators this process holds: device, tag, ranks, rank, backend, origin, failure,
    memory, and activity (collectives issued, bytes moved, seconds busy, last error)."""
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
    forget_bound(world_is_per_thread())
