# ruff: noqa: N999  (the native module is named _C, like torch._C)
"""Type stubs for c10d_func._C, the native registry module (python/csrc/module.cpp).

Loading it loads libc10d_func.so, whose static registrations create torch.ops.c10d_func.*; the
functions here configure the group-resolution registry. Most users want the wrappers in
c10d_func (init, register_group, groups, world, shutdown) instead.
"""

from collections.abc import Callable
from typing import Any, TypedDict

from torch.distributed import Store

class _WorldInfo(TypedDict):
    rank: int
    world_size: int
    origin: str  # "env://", "default process group" or "init"
    delegated: bool  # collectives run only on torch's own groups (threads, fake, Python group)
    per_thread: bool  # each thread is a rank of its own world (torch's threaded harness)

class _Activity(TypedDict):
    collectives: int  # issued, messages included
    bytes: int  # per collective, the larger of its input and its output
    busy_seconds: float  # time with at least one collective in flight
    last_error: str | None

class _GroupInfo(TypedDict):
    device: str  # "cpu" or "cuda"
    tag: str
    ranks: list[int]  # the chunk's global ranks, in group order
    rank: int  # this process's index in ranks
    backend: str  # e.g. "gloo", "nccl"
    origin: str  # "created" (rendezvous on first use) or "registered" (register_group)
    failure: str | None  # why the communicator is unusable, once a collective on it failed
    memory: dict[str, int]  # the transport's memory counters (shm's symmetric memory)
    activity: _Activity  # what it has done

def init(store: Store, rank: int, world_size: int) -> None:
    """Sets the world explicitly; `store` is shared by every process of the job."""

def set_world_provider(
    provider: Callable[[], tuple[Store, int, int, bool, bool] | None],
) -> None:
    """Installs the callable that offers (store, rank, world_size, delegated, per_thread) of an
    initialised default process group, consulted before the env:// variables."""

def add_backend_transport(
    device: str, name: str, factory: Callable[[Store, int, int, float], Any]
) -> None:
    """Makes transport `name` available for `device` tensors: factory(store, rank, size,
    timeout_seconds) returns a c10d Backend for one chunk, built over a store already
    prefixed for that chunk."""

def select_transport(device: str, name: str, tag: str = "") -> None:
    """Chooses the transport of `device` tensors for `tag` (or, with tag "", for every tag
    without a choice of its own)."""

def register_backend(backend: Any, device: str, tag: str, ranks: list[int]) -> None:
    """Binds an existing c10d Backend to (device, tag, ranks)."""

def unbind_group(tag: str, ranks: list[int]) -> None:
    """Drops the ProcessGroup bound to (tag, ranks) on every device (torch destroyed it)."""

def forget_message_routes(tag: str) -> None:
    """Drops the message channels of `tag` (torch destroyed the group it names)."""

def groups() -> list[_GroupInfo]:
    """The communicators this process holds."""

def store_connections_held() -> int:
    """Connections to stores that c10d_func's pools hold, idle or lent."""

def world() -> _WorldInfo | None:
    """The resolved world, or None before the first collective resolved one."""

def shutdown() -> None:
    """Waits for pending collectives, then drops every communicator (the world stays)."""

def settle_at_exit() -> tuple[int, int]:
    """Gives collectives issued and never waited C10D_FUNC_TIMEOUT to finish: (unwaited, abandoned)."""

def pending_count() -> int:
    """Outputs whose collective has not been waited on (and whose storage is alive)."""

def has_native_gloo() -> bool:
    """Whether the Gloo transport is made in C++ (the library was built with Gloo's headers)."""

def op_names() -> list[str]:
    """Every operator with kernels per dispatch key (the one list in ops/op_list.h)."""

def op_table() -> list[tuple[str, str, str]]:
    """(name, lowering, effects) of every operator with kernels per dispatch key: lowering is
    out_of_place, in_place, reinplaced or wait; effects is pure or effects (ops/op_list.h)."""

def collective_timeout_seconds() -> float:
    """How long a collective may wait for its peers (C10D_FUNC_TIMEOUT)."""

def create_backend(
    store: Any, rank: int, size: int, timeout_seconds: float, name: str, members: list[int]
) -> Any:
    """The c10d_func torch.distributed backend of one group (forms its CPU communicator)."""

def split_backend(parent: Any, child: Any | None, color: int, key: int) -> None:
    """split_group's device step: splits the parent's device communicators (ncclCommSplit)."""

def is_func_backend(backend: Any) -> bool:
    """Whether a c10d Backend is c10d_func's own."""

def set_group_binder(binder: Callable[[str, str, str, list[int], int, bool], bool]) -> None:
    """Installs the callable that binds torch's ProcessGroup for a group with no communicator
    yet: binder(op, device, tag, ranks, group_size, delegated) -> whether it bound one."""

def register_python_group(
    group: Any,
    caller: Callable[..., Any],
    device: str,
    tag: str,
    ranks: list[int],
    rank: int,
    name: str,
    has_reduce: bool,
    has_reduce_scatter: bool,
) -> None:
    """Binds a ProcessGroup written in Python for `device` under `tag`: its collectives are its
    own methods, called as caller(group, collective, *args)."""

def world_changed(per_thread: bool, initialised: bool) -> None:
    """torch.distributed's default group changed in the calling thread (init or destroy)."""
