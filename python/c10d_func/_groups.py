"""Resolves the `group=` argument of the functional API to the ops' plain data: (tag, ranks, group_size).

The ops name their group with a tag and a list of global ranks cut into consecutive chunks of
group_size, so a traced graph holds no ProcessGroup. Every group type torch's functional
collectives accept is desugared here:

- ``list[int]``: one group, those global ranks;
- ``list[list[int]]``: equal-sized disjoint groups, flattened (one call serves each of them);
- ``ProcessGroup``: its global ranks, bound in the registry to the group's tag, torch's own
  (``c10d._get_group_tag``: ``ptd:<group name>``, or the ``pg_tag`` it was made with), so the
  call runs on that very group, whatever implements it (a C++ backend, a Python subclass, a fake
  group), and ``_find_pg_by_ranks_and_tag(tag, ranks)`` finds it again;
- a group name (``str``, torch's ``GroupName``): the ProcessGroup of that name;
- a 1-D ``DeviceMesh``: every rank of the mesh, on the mesh's own group;
- ``(DeviceMesh, dim)``: every group along mesh dimension ``dim`` at once (dim may be its name),
  each member on its own mesh group along ``dim``. A mesh's groups number their members by group
  rank, as their ProcessGroups do (see `_in_group_order`), whatever order the mesh lists them in.

A graph holds only the plain data. Run elsewhere (an exported program in a new job, a compiled
one in another thread-rank), a ``ptd:<name>`` tag runs on the group of that name there when one
exists with the same ranks, a user tag on torch's group made there with that ``pg_tag`` and those
ranks (found by the registry's binder, `_registry._bind_on_first_use`), and otherwise on
c10d_func's own communicator for those ranks.

A group name that no group in this process has, called with meta tensors only, stands for a group
of unknown size: see `meta_stand_in`.

Under torch.compile the resolution runs once at trace time (see `resolve_group`) and its result is
baked into the graph as literals; eager calls and make_fx / export tracing run it as plain Python.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Union

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import _disable_current_modes

from ._import_hooks import after_import
from ._registry import bind

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

__all__ = [
    "RANK_TYPES",
    "GroupNotFoundError",
    "GroupTypeError",
    "MeshDimError",
    "MeshNotOneDimensionalError",
    "meta_stand_in",
    "resolve_group",
    "size_unknown_error",
]

# The group types accepted by `group=`, named as in torch.distributed._functional_collectives.
RANK_TYPES = Union[
    list[int],
    list[list[int]],
    dist.ProcessGroup,
    "DeviceMesh",
    tuple["DeviceMesh", int | str],
    str,
]


# Where torch's functional collectives reject a `group=` with another exception type than
# c10d_func's, the exception is both, so code written against either keeps catching it.


class MeshNotOneDimensionalError(ValueError, AssertionError):
    """A DeviceMesh of more than one dimension without a dim (torch: AssertionError)."""


class MeshDimError(ValueError, IndexError):
    """A mesh dimension out of range (torch indexes its list of dimension groups: IndexError)."""


class GroupTypeError(TypeError, ValueError):
    """A `group=` of no accepted type (torch: ValueError)."""


class GroupNotFoundError(RuntimeError):
    """A group name that no group in this process has (torch: RuntimeError, the same text)."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)  # only the message in args: it pickles across processes
        self.name = name


def group_name(pg: dist.ProcessGroup) -> str:
    """The name torch registered `pg` under. A group written in Python may never have been told
    its name (torch hands the object itself back as the group), but torch's world records it."""
    try:
        return pg.group_name
    except RuntimeError:
        return dist.distributed_c10d._get_process_group_name(pg)


def _process_group_tag(pg: dist.ProcessGroup) -> str:
    """torch's tag of `pg`, as its functional collectives put it in graphs: "ptd:<name>", or the
    `pg_tag` the group was made with. Both are agreed by every member (the name derives from the
    ranks and a creation counter), so every member bakes the same tag into its graph, and torch's
    `_find_pg_by_ranks_and_tag(tag, ranks)` leads back to the group."""
    try:
        tag = dist.distributed_c10d._get_group_tag(pg)
    except (KeyError, AttributeError):
        tag = ""
    # A group torch's tag map does not hold (one constructed directly, not by new_group): its
    # name, spelled as torch spells its own groups' tags.
    return tag or f"ptd:{group_name(pg)}"


def _from_process_group(pg: dist.ProcessGroup | int, tag: str) -> tuple[str, list[int], int]:
    if pg == dist.GroupMember.NON_GROUP_MEMBER:
        # new_group hands ranks outside the group this sentinel instead of a group.
        raise ValueError(
            "c10d_func: group= is a process group this rank is not a member of "
            f"(got {pg!r}); call collectives only on the group's members"
        )
    ranks = dist.get_process_group_ranks(pg)
    tag = tag or _process_group_tag(pg)
    bind(pg, tag, ranks)
    return tag, ranks, len(ranks)


def _mesh_dim(mesh: DeviceMesh, dim: int | str) -> int:
    if isinstance(dim, str):
        names = mesh.mesh_dim_names or ()
        if dim not in names:
            raise ValueError(
                f"c10d_func: mesh {mesh} has no dimension named {dim!r} (names: {names})"
            )
        return names.index(dim)
    if not isinstance(dim, int):
        raise GroupTypeError(
            f"c10d_func: group= is (DeviceMesh, {type(dim).__name__}); the dim must be an int or "
            "a dimension name (Invalid tuple for group must be (DeviceMesh, int))"
        )
    if not -mesh.ndim <= dim < mesh.ndim:
        raise MeshDimError(
            f"c10d_func: mesh dimension {dim} is out of range for a {mesh.ndim}-D mesh "
            "(list index out of range)"
        )
    return dim % mesh.ndim


def _mesh_group(mesh: DeviceMesh, dim: int) -> dist.ProcessGroup | None:
    """The caller's group along `dim`, or None for a mesh made without groups."""
    try:
        pg = mesh.get_group(dim)
    except (RuntimeError, ValueError, KeyError, AttributeError, AssertionError):
        return None
    return pg if isinstance(pg, dist.ProcessGroup) else None


def _in_group_order(rows: list[list[int]], members: list[int] | None) -> list[list[int]]:
    """The mesh's groups along a dim (`rows`, in mesh order), each ordered as its ProcessGroup
    orders its members.

    A member's index in its group is its group rank, not its mesh coordinate: torch makes a
    mesh's groups with `new_group` or `split_group`, which sort their ranks, and DTensor places
    shards by group rank (`DeviceMesh.get_local_rank`), as torch's functional collectives
    gather them. So on a mesh such as ``[[3, 1], [2, 0]]`` the groups along dim 1 are
    ``[1, 3]`` and ``[0, 2]``. The caller's own group (its `members`, in its order; one of
    `rows`) says which order the mesh's groups have; without one, torch's order: ascending.
    """
    own = next(
        (row for row in rows if members is not None and sorted(row) == sorted(members)), None
    )
    if own is not None and members == own:
        return rows  # groups in mesh order (a group made from a mesh's rows as they are)
    return [members if row is own else sorted(row) for row in rows]


def _from_mesh_dim(mesh: DeviceMesh, dim: int | str, tag: str) -> tuple[str, list[int], int]:
    dim = _mesh_dim(mesh, dim)
    size = mesh.size(dim)
    # Rows of this matrix are the groups along `dim` (every other coordinate fixed), so chunks of
    # `size` in its flattening are exactly those groups and one call serves all of them.
    # Plain arithmetic on the mesh's own rank tensor: no mode active while tracing (make_fx,
    # fake tensors) may record or intercept it.
    with _disable_current_modes():
        rows = [
            [int(r) for r in row] for row in mesh.mesh.transpose(dim, -1).reshape(-1, size).tolist()
        ]
    pg = _mesh_group(mesh, dim)
    members = dist.get_process_group_ranks(pg) if pg is not None else None
    ranks = [r for row in _in_group_order(rows, members) for r in row]
    if pg is not None:
        # Each member runs on its own mesh group (named in its graph by that group's tag), as
        # torch's functional collectives do; a graph run where the group does not exist falls
        # back to c10d_func's communicator for the same ranks.
        tag = tag or _process_group_tag(pg)
        bind(pg, tag, members)
    return tag, ranks, size


def _from_rank_lists(group: list, tag: str) -> tuple[str, list[int], int]:
    if not group:
        raise ValueError("c10d_func: group= is an empty list of ranks")
    if not isinstance(group[0], (list, tuple)):
        return tag, [operator.index(r) for r in group], len(group)
    size = len(group[0])
    ranks: list[int] = []
    for members in group:
        if len(members) != size:
            # torch's phrase, so code that matches torch's message keeps working.
            raise ValueError(
                f"c10d_func: group= lists groups of different sizes ({size} and {len(members)}): "
                "group sizes must be identical in one call"
            )
        ranks.extend(operator.index(r) for r in members)
    return tag, ranks, size


def _resolve(group: RANK_TYPES, tag: str) -> tuple[str, list[int], int]:
    """Every group type but rank lists (ProcessGroups arrive by name, see `resolve_group`)."""
    from torch.distributed.device_mesh import DeviceMesh

    if isinstance(group, dist.ProcessGroup):
        return _from_process_group(group, tag)
    if isinstance(group, str):
        return _from_process_group(_process_group_of_name(group), tag)
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise MeshNotOneDimensionalError(
                f"c10d_func: group= is a {group.ndim}-D DeviceMesh (Only 1D mesh is supported "
                "without a dim); pass (mesh, dim) to name the mesh dimension to run along"
            )
        return _from_mesh_dim(group, 0, tag)
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return _from_mesh_dim(group[0], group[1], tag)
    if group == dist.GroupMember.NON_GROUP_MEMBER:
        return _from_process_group(group, tag)
    if isinstance(group, tuple):  # torch's phrase for tuples, and for any other type
        got = f"({', '.join(type(g).__name__ for g in group)}): Invalid tuple for group"
    else:
        got = f"{type(group).__name__}: Unsupported group type"
    raise GroupTypeError(
        "c10d_func: group= must be a list of ranks, a list of equal-sized rank lists, a "
        f"ProcessGroup, a group name, a 1-D DeviceMesh or (DeviceMesh, dim); got {got}"
    )


def _process_group_of_name(name: str) -> dist.ProcessGroup:
    from torch.distributed.distributed_c10d import _resolve_process_group

    try:
        return _resolve_process_group(name)
    except RuntimeError as error:
        # torch's type and text, in a class `meta_stand_in` recognises.
        raise GroupNotFoundError(
            f"c10d_func: group= is a group name that no group of this process has ({error})", name
        ) from error


def meta_stand_in(
    missing: GroupNotFoundError, inputs: list[torch.Tensor], group_size: int
) -> tuple[str, list[int], int]:
    """The plain data of a call on meta tensors that names a group this process does not have
    (`missing`): tracing shapes before any process group exists, as torch allows.

    torch traces such calls where its Python side needs no group size (all_reduce, broadcast):
    their meta kernels never look the group up. Here every op whose output shape does not depend
    on the group size traces when all its inputs are meta tensors: the call names tag
    ``ptd:<name>`` (the group of that name, where one exists when the graph runs) and a stand-in
    group of members ``0 .. group_size-1``, `group_size` being the smallest group the call's own
    arguments allow (1, src/dst + 1, len(src_dst), len(split sizes)). The checks that need the
    real size (an index inside the group, an even split) are left to the run. Any other input
    raises `missing`, torch's error.
    """
    if not all(t.is_meta for t in inputs):
        raise missing
    group_size = max(operator.index(group_size), 1)
    return f"ptd:{missing.name}", list(range(group_size)), group_size


def size_unknown_error(
    missing: GroupNotFoundError, op: str, inputs: list[torch.Tensor]
) -> GroupNotFoundError:
    """What a call raises that names a group this process does not have (`missing`) when its
    output shape depends on the group size: on meta tensors, an error saying why they cannot
    trace (torch raises there too, asking for the size); otherwise `missing`, torch's error."""
    if not all(t.is_meta for t in inputs):
        return missing
    error = GroupNotFoundError(
        f"c10d_func.{op}: group= names the process group {missing.name!r}, which this process "
        "does not have (no process group is registered under that name); calls on meta tensors "
        f"trace without it, but the output shape of {op} depends on the group's size, which only "
        "the group knows. Create the group first, or pass the group's ranks",
        missing.name,
    )
    error.__cause__ = missing
    return error


# Dynamo runs this at trace time on the real arguments and bakes its result into the graph as
# constants: the group objects it reads (ProcessGroup, DeviceMesh and its rank tensor) cannot be
# traced, and binding a ProcessGroup must happen in the process that will run the graph, before
# it runs, which tracing on every rank guarantees. Marked when Dynamo loads (nothing is traced
# before): `torch._dynamo` costs 2 s to import, which eager programs need not pay.
def _resolve_constant(group: RANK_TYPES, tag: str) -> tuple[str, list[int], int]:
    return _resolve(group, tag)


after_import("torch._dynamo", lambda: torch._dynamo.assume_constant_result(_resolve_constant))


def resolve_group(group: RANK_TYPES, tag: str = "") -> tuple[str, list[int], int]:
    """Desugars `group` and `tag` to the ops' (tag, ranks, group_size); see the module docstring."""
    if isinstance(group, list):
        # Traced as plain Python: Dynamo may have made a changing rank symbolic, and
        # operator.index specialises it back to a literal (guarded: another value recompiles).
        return _from_rank_lists(group, tag)
    if isinstance(group, dist.ProcessGroup):
        # Dynamo hands constant functions an opaque stand-in for a ProcessGroup, but can read its
        # name, which leads back to the very group.
        group = group_name(group)
    elif isinstance(group, tuple) and len(group) == 2 and isinstance(group[1], int):
        group = (group[0], operator.index(group[1]))  # a literal dim, as for the ranks above
    return _resolve_constant(group, tag)
