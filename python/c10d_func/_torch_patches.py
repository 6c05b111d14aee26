"""Every place c10d_func changes torch's own code, in one list (`PATCHES`), and every read or
write of torch.distributed's private state (its world's maps).

A patch replaces one attribute of one torch module: a function that torch looks up in its module
at call time, or a table it reads. Each is
- applied right after its module is imported, never importing it (`_import_hooks.after_import`:
  `import c10d_func` does not pay for inductor);
- applied once (a function's replacement carries `_c10d_func_patch`, its name; a table's entries
  are the same when set again);
- guarded: where the attribute is missing (a torch c10d_func does not know), a required patch
  raises at import with what to do, and an optional one warns once with what the program loses.
  Nothing fails silently;
- checked by name in tests/python/test_torch_patches.py, which fails when one stops applying.

`status()` says what happened to each. The comment above each patch names the torch versions it
was checked against and the hook torch would need for the patch to go away (docs/compatibility.md,
"Where c10d_func patches torch", lists them).

Not patches, and so not here: what c10d_func adds through torch's registration points (the ops'
schemas and kernels, `register_lowering`, inductor's `custom_ops_to_c_shims` config, the
backend through `Backend.register_backend`), and torch's private functions it only calls
(`_get_default_group`, `_get_group_tag`, `_get_process_group_name`, `_create_work_from_future`,
`ProcessGroup._register_backend`, ...).
"""

from __future__ import annotations

import datetime
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ._import_hooks import after_import

_MARK = "_c10d_func_patch"
_CHECKED_WITH = "torch 2.11.0 and 2.14.1"


@dataclass(frozen=True)
class Patch:
    name: str
    module: str
    attribute: str
    # Without it c10d_func is wrong (required: import fails); without the others a compiled
    # program is still right, only slower or less informed (a warning says which).
    required: bool
    purpose: str
    # Given torch's attribute, returns what replaces it (or changes the table in place and
    # returns it).
    replace: Callable[[Any], Any]


_status: dict[str, str] = {}
# What the package adds to a patch's replacement, set by install(): the registry's reaction to a
# new default group, and to a destroyed group (its name).
_on_default_group_change: list[Callable[[Any], None]] = []
_on_group_destroyed: list[Callable[[Any], None]] = []


def _then_tell(listeners: str) -> Callable[[Any], Any]:
    """A patch's replacement for a function of one argument: torch's function, then each
    function of the module's list named `listeners` (looked up at each call), with the same
    argument."""

    def replace(original: Callable[[Any], None]) -> Callable[[Any], None]:
        def observed(argument: Any) -> None:
            original(argument)
            for react in globals()[listeners]:
                react(argument)

        return observed

    return replace


# torch.distributed: init_process_group and destroy_process_group both end in
# `_update_default_pg`, which runs in the thread whose world changes (every thread, under the
# threaded harness). The registry must follow the default group, or it would keep serving the
# communicators of a destroyed world. Checked: 2.11.0, 2.14.1. Hook torch would need: a public
# observer of default-group changes (e.g. `torch.distributed.register_default_group_hook`).
_follow_default_group = _then_tell("_on_default_group_change")


# torch.distributed: destroy_process_group(group) (and torch's abort and shrink of a group) ends
# in `_unregister_process_group(name)`, looked up in its module at call time. A group c10d_func
# bound (its functional ops called with it, or register_group) is held by the registry and by
# `_registry._bound`; without word of its end both would keep it, and its backends' sockets and
# threads, for the rest of the process. Checked: 2.11.0, 2.14.1. Hook torch would need: a public
# observer of destroyed groups (or the ProcessGroup's shutdown reaching every backend's owner).
_forget_destroyed_groups = _then_tell("_on_group_destroyed")


# AOT autograd checks at run time that a custom op's output does not alias its input, and
# exempts only torch's collective namespaces, by name. `c10d_func::wait_tensor` returns its
# input's buffer, as torch's wait_tensor does (a copy per wait would cost a memcpy of every
# collective's output), and `Tensor(a) self -> Tensor(a)` is refused by functionalization for
# custom ops. So the wait, and only it, gets torch's exemption. Checked: 2.11.0, 2.14.1. Hook:
# a declared alias for custom ops that functionalization accepts, or a registry of namespaces
# exempt from the check.
def _exempt_wait_from_alias_check(check: Callable[..., Any]) -> Callable[..., Any]:
    def _check_custom_op_aliasing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in ("c10d_func::wait_tensor", "c10d_func::wait_tensor.default"):
            return None
        return check(name, *args, **kwargs)

    return _check_custom_op_aliasing


# Inductor's re-inplacing pass turns `all_reduce(buf)` into `all_reduce_(buf)` when `buf` is dead
# afterwards, so the collective writes the buffer with no copy; its table names torch's ops.
# Ours go into the same table, with their in-place ops. Checked: 2.11.0, 2.14.1. Hook: a public
# registration of in-place variants (`register_inplaceable_op`).
def _reinplace_collectives(table: dict[Any, Any]) -> dict[Any, Any]:
    from torch._inductor.fx_passes.reinplace import InplaceableOp

    ops = torch.ops.c10d_func
    table[ops.all_reduce.default] = InplaceableOp(ops.all_reduce_.default, 0)
    table[ops.all_reduce_coalesced.default] = InplaceableOp(ops.all_reduce_coalesced_.default, 0)
    return table


# `reorder_for_locality` (inference graphs) moves every node next to its first user, except
# torch's wait_tensor, which it leaves in place: a collective moved to just before its wait could
# no longer overlap with the compute between them. The check names torch's wait only, so around
# the pass c10d_func's waits carry torch's target, and get their own back after. Checked: 2.11.0,
# 2.14.1. Hook: a "wait" tag on ops (`torch.Tag`) that the pass tests instead of one target.
def _keep_waits_apart_from_their_collectives(reorder: Callable[[Any], Any]) -> Callable[[Any], Any]:
    ours = torch.ops.c10d_func.wait_tensor.default
    theirs = torch.ops._c10d_functional.wait_tensor.default

    def reorder_for_locality(graph: torch.fx.Graph) -> Any:
        waits = list(graph.find_nodes(op="call_function", target=ours))
        for node in waits:
            node.target = theirs
        try:
            return reorder(graph)
        finally:
            for node in waits:
                node.target = ours

    return reorder_for_locality


# Inductor's runtime estimate of a collective (the overlap reordering passes, inductor's
# metrics) reads the kernel's last argument as a torch group name; c10d_func's last argument is
# the group size itself (on GPU the unpatched function raised AttributeError for our ops).
# Checked: 2.11.0, 2.14.1. Hook: a registry of collective ops with a group-size accessor.
def _group_size_for_runtime_estimates(group_size: Callable[[Any], int]) -> Callable[[Any], int]:
    def get_collective_group_size(node: Any) -> int:
        op = getattr(node, "op_overload", None)
        if getattr(op, "namespace", None) == "c10d_func":
            return int(node.constant_args[-1])
        return group_size(node)

    return get_collective_group_size


# Every wait of an AsyncCollectiveTensor, torch's and c10d_func's eager outputs alike, goes
# through funcol's `wait_tensor`, which calls `_c10d_functional.wait_tensor`. torch registers
# that op's autograd formula from Python (`torch.library.register_autograd`), so each call runs a
# Python kernel before the C++ one: 2.8 µs per wait where the C++ kernel alone takes 0.6, a third
# of an eager 8 B all_reduce + wait. A plain tensor that autograd does not track, with no
# tracer, dispatch mode or torch function mode active, gets the C++ kernel directly; anything
# else takes torch's path unchanged.
# Checked: 2.11.0, 2.14.1. Hook: wait_tensor's identity backward registered in C++ (as torch's
# other collectives' are), or `register_autograd` skipping Python for inputs that need no grad.
def _wait_untracked_tensors_in_cpp(wait: Callable[[Any], Any]) -> Callable[[Any], Any]:
    from ._async import _no_mode_or_tracer_present  # the eager API's own check

    op = torch.ops._c10d_functional.wait_tensor.default
    kernel = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    function_modes = torch._C._len_torch_function_stack
    compiling = torch.compiler.is_compiling
    grad_enabled = torch.is_grad_enabled
    plain = torch.Tensor

    def wait_tensor(tensor: Any) -> Any:
        # Dynamo folds `compiling()` to True and traces torch's function, as before.
        if (
            not compiling()
            and type(tensor) is plain
            and not (tensor.requires_grad and grad_enabled())
            and function_modes() == 0
            and _no_mode_or_tracer_present()
        ):
            # Releases the GIL while it waits, as the op's own call does.
            return op.redispatch(kernel, tensor)
        return wait(tensor)

    return wait_tensor


# torch.distributed: `_set_pg_timeout`, the way torch's own DistributedTest and
# `dist.breakpoint` change a group's timeout. torch 2.11's changes Gloo and NCCL backends only
# (any other gets a warning and keeps its timeout); 2.14's goes through ProcessGroup.set_timeout,
# which reaches every backend. A Gloo program that shortens a group's timeout must do the same
# on backend "c10d_func" (parity): where torch has no `set_timeout`, the group's c10d_func
# backends take the timeout too, and torch's function is left the rest.
# Checked: 2.11.0 (wrapped), 2.14.1 (torch's own, unchanged). Hook: 2.14's `set_timeout`.
def _set_pg_timeout_on_every_backend(set_pg_timeout: Callable[..., None]) -> Callable[..., None]:
    c10d = sys.modules["torch.distributed.distributed_c10d"]

    def set_timeout_of_each_backend(timeout: Any, group: Any = None) -> None:
        from ._C import is_func_backend
        from ._registry import device_backend  # unwraps DETAIL's ProcessGroupWrapper

        if hasattr(c10d, "set_timeout"):
            set_pg_timeout(timeout, group)  # reaches every backend already
            return
        group = c10d._get_default_group() if group is None else group
        if c10d._rank_not_in_group(group):
            raise ValueError("Invalid process group specified")
        ours, others = {}, False
        for device in group._device_types:
            backend = device_backend(group, device.type)
            if is_func_backend(backend):
                ours[id(backend)] = backend  # one backend may serve cpu and cuda
            else:
                others = True
        if others or not ours:
            set_pg_timeout(timeout, group)
        for backend in ours.values():
            backend.set_timeout(timeout)

    return set_timeout_of_each_backend


# torch.distributed: `monitored_barrier`. torch 2.11's refuses in Python every group whose backend
# is not named "gloo" ("monitored_barrier is only implemented for GLOO backend"), though the
# group's own `monitored_barrier` method reaches any backend; 2.14's asks only for a CPU backend.
# A Gloo program's monitored_barrier must run on backend "c10d_func": where torch refuses a group
# whose CPU backend is c10d_func's, the call goes to the group's method as 2.14's does.
# Checked: 2.11.0 (refuses, wrapped), 2.14.1 (torch's own runs). Hook: 2.14's check.
def _monitored_barrier_of_any_cpu_backend(barrier: Callable[..., Any]) -> Callable[..., Any]:
    c10d = sys.modules["torch.distributed.distributed_c10d"]

    def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False):
        try:
            return barrier(group, timeout, wait_all_ranks)
        except ValueError as refused:
            from ._C import is_func_backend
            from ._registry import device_backend  # unwraps DETAIL's ProcessGroupWrapper

            group_to_use = c10d._get_default_group() if group is None else group
            if (
                "only implemented for GLOO" not in str(refused)
                or torch.device("cpu") not in group_to_use._device_types
                or not is_func_backend(device_backend(group_to_use, "cpu"))
            ):
                raise
        if timeout is None:
            timeout = c10d._get_default_timeout(c10d.get_backend(group))
        elif isinstance(timeout, float):
            timeout = datetime.timedelta(seconds=timeout)  # as torch converts it
        c10d._check_valid_timeout(timeout)
        return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    return monitored_barrier


PATCHES: tuple[Patch, ...] = (
    Patch(
        "follow_default_group",
        "torch.distributed.distributed_c10d",
        "_update_default_pg",
        True,
        "follow init_process_group / destroy_process_group",
        _follow_default_group,
    ),
    Patch(
        "forget_destroyed_groups",
        "torch.distributed.distributed_c10d",
        "_unregister_process_group",
        False,
        "let go of a destroyed group bound to c10d_func: without it the group, its sockets and "
        "threads stay until the process ends",
        _forget_destroyed_groups,
    ),
    Patch(
        "exempt_wait_from_alias_check",
        "torch._functorch._aot_autograd.runtime_wrappers",
        "_check_custom_op_aliasing",
        False,
        "exempt c10d_func::wait_tensor (which returns its input, like torch's) from AOT "
        "autograd's alias check: without it compiled programs warn on every wait",
        _exempt_wait_from_alias_check,
    ),
    Patch(
        "reinplace_collectives",
        "torch._inductor.fx_passes.reinplace",
        "inplaceable_ops",
        False,
        "let inductor run all_reduce in place on a dead buffer: without it each costs a copy",
        _reinplace_collectives,
    ),
    Patch(
        "keep_waits_apart_from_their_collectives",
        "torch._inductor.fx_passes.post_grad",
        "reorder_for_locality",
        False,
        "keep a collective apart from its wait in inference graphs: without it compute no "
        "longer overlaps the collective",
        _keep_waits_apart_from_their_collectives,
    ),
    Patch(
        "wait_untracked_tensors_in_cpp",
        "torch.distributed._functional_collectives",
        "wait_tensor",
        False,
        "wait an AsyncCollectiveTensor without the Python autograd kernel torch registers for "
        "wait_tensor: without it every eager wait costs about 2 µs more",
        _wait_untracked_tensors_in_cpp,
    ),
    Patch(
        "group_size_for_runtime_estimates",
        "torch._inductor.comm_analysis",
        "get_collective_group_size",
        False,
        "give inductor's runtime estimates the group size of c10d_func collectives: without it "
        "the overlap passes may fail on them",
        _group_size_for_runtime_estimates,
    ),
    Patch(
        "set_pg_timeout_on_every_backend",
        "torch.distributed.distributed_c10d",
        "_set_pg_timeout",
        False,
        "let torch 2.11's _set_pg_timeout change a c10d_func group's timeout as it changes a "
        "Gloo group's: without it the group keeps the timeout it was made with",
        _set_pg_timeout_on_every_backend,
    ),
    # Both names: `torch.distributed` binds its own copy of the function (a star import).
    Patch(
        "monitored_barrier_of_any_cpu_backend",
        "torch.distributed",
        "monitored_barrier",
        False,
        "let torch 2.11's dist.monitored_barrier run on a c10d_func group as on a Gloo group: "
        "without it 2.11 refuses it (the group's own monitored_barrier method still works)",
        _monitored_barrier_of_any_cpu_backend,
    ),
    Patch(
        "c10d_monitored_barrier_of_any_cpu_backend",
        "torch.distributed.distributed_c10d",
        "monitored_barrier",
        False,
        "the same for distributed_c10d.monitored_barrier, called by that name",
        _monitored_barrier_of_any_cpu_backend,
    ),
)


def apply(patch: Patch, module: Any) -> None:
    """Applies `patch` to `module` (torch's, or a stand-in in tests)."""
    original = getattr(module, patch.attribute, None)
    if original is None:
        _status[patch.name] = "missing"
        message = (
            f"c10d_func: torch {torch.__version__} has no {patch.module}.{patch.attribute}, which "
            f"c10d_func patches to {patch.purpose} (checked with {_CHECKED_WITH}; see "
            f"python/c10d_func/_torch_patches.py)."
        )
        if patch.required:
            raise RuntimeError(
                f"{message} Install a supported torch (scripts/install.sh pins one)."
            )
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return
    if getattr(original, _MARK, None) != patch.name:
        # A table is changed in place, which is the same again on a second application; a
        # function is wrapped once, its wrapper marked.
        replacement = patch.replace(original)
        if replacement is not original:
            setattr(replacement, _MARK, patch.name)
            setattr(module, patch.attribute, replacement)
    _status[patch.name] = "applied"


def status() -> dict[str, str]:
    """Each patch's state: "applied", "pending" (its module is not imported yet) or "missing"."""
    return {patch.name: _status.get(patch.name, "pending") for patch in PATCHES}


def install(
    on_default_group_change: Callable[[Any], None], on_group_destroyed: Callable[[str], None]
) -> None:
    """Applies every patch as its module is imported; `on_default_group_change(pg)` runs after
    torch changes the default group, `on_group_destroyed(name)` after it destroys a group."""
    if on_default_group_change not in _on_default_group_change:
        _on_default_group_change.append(on_default_group_change)
    if on_group_destroyed not in _on_group_destroyed:
        _on_group_destroyed.append(on_group_destroyed)
    for patch in PATCHES:
        after_import(patch.module, lambda patch=patch: apply(patch, sys.modules[patch.module]))
    # Where AOT autograd's check cannot be patched, its warning for our wait (and only that one)
    # is silenced instead: once per process, in Python's warning filters.
    after_import("torch._functorch._aot_autograd.runtime_wrappers", _silence_unexempted_wait)


WAIT_ALIAS_WARNING = r"c10d_func::wait_tensor\b.*The output of this custom operator"


def silence_wait_alias_warning() -> None:
    """Filters out AOT autograd's alias warning for c10d_func::wait_tensor, nothing else."""
    warnings.filterwarnings("ignore", message=WAIT_ALIAS_WARNING, category=UserWarning)


def _silence_unexempted_wait() -> None:
    if _status.get("exempt_wait_from_alias_check") == "missing":
        silence_wait_alias_warning()


# The six maps of torch.distributed's world that `new_group` fills; torch 2.11+ fills them through
# `_register_pg_in_world`, older torch only inline, in new_group itself.
_WORLD_MAPS = (
    "pg_map",
    "pg_names",
    "pg_backend_config",
    "pg_group_ranks",
    "tags_to_pg",
    "pg_to_tag",
)


def register_group_in_world(
    pg: Any, backend_name: str, name: str, store: Any, global_ranks: list[int], config: str
) -> None:
    """Makes `pg` a group torch.distributed knows, as new_group would: ranks, name and tag.
    Checked: 2.11.0, 2.14.1 (both have `_register_pg_in_world`). Hook: that function, public."""
    from torch.distributed import distributed_c10d as c10d

    mapping = {g: i for i, g in enumerate(global_ranks)}
    register = getattr(c10d, "_register_pg_in_world", None)
    if register is not None:
        register(
            pg,
            backend_name=backend_name,
            store=store,
            group_name=name,
            backend_config=config,
            rank_mapping=mapping,
        )
        return
    world = getattr(c10d, "_world", None)
    missing = [m for m in _WORLD_MAPS if not hasattr(world, m)]
    if missing or not hasattr(c10d, "_register_process_group"):
        raise RuntimeError(
            f"c10d_func.split_group: torch {torch.__version__} has neither "
            f"_register_pg_in_world nor the world maps {missing or _WORLD_MAPS} that make a group "
            f"known to torch.distributed; install a supported torch ({_CHECKED_WITH})"
        )
    world.pg_map[pg] = (backend_name, store)
    world.pg_names[pg] = name
    world.pg_backend_config[pg] = config
    c10d._register_process_group(name, pg)
    world.pg_group_ranks[pg] = mapping
    tag = f"ptd:{name}"
    world.tags_to_pg.setdefault(tag, []).append(pg)
    world.pg_to_tag[pg] = tag


# Reads of the same private world: torch has no public accessor for either.


def is_group_of_this_process(pg: Any) -> bool:
    """Whether `pg` is a group torch.distributed made (or was told of) in this process."""
    from torch.distributed import distributed_c10d as c10d

    return pg in c10d._world.pg_group_ranks


def store_of(pg: Any) -> Any:
    """The store `pg` was made with (new_group's prefix store)."""
    from torch.distributed import distributed_c10d as c10d

    return c10d._world.pg_map[pg][1]


def world_is_per_thread() -> bool:
    """True under torch's threaded test harness, where each thread is a rank with its own world
    (torch swaps its world record for a thread-local one)."""
    from torch.distributed import distributed_c10d as c10d

    return type(c10d._world).__name__ == "ThreadLocalWorld"
