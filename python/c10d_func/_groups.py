"""Resolves the `group=` argument of the functional API to the ops' plain data: (tag, ranks, group_size).

The ops name their group with a tag and a list of global ranks cut into consecutive chunks of
group_size, so a traced graph holds no ProcessGroup. Every group type torch's functional
collectives accept is desugared here:

- ``list[int]``: one group, those global ranks;
- ``list[list[int]]``: equal-sized disjoint groups, flattened (one call serves each of them);
- ``ProcessGroup``: its global ranks, bound in the registry to the group's tag
  (``ptd:<group name>``, as torch names its groups' tags), so the call runs on that very group,
  whatever implements it (a C++ backend, a Python subclass, a fake group);
- a group name (``str``, torch's ``GroupName``): the ProcessGroup of that name;
- a 1-D ``DeviceMesh``: every rank of the mesh, on the mesh's own group;
- ``(DeviceMesh, dim)``: every group along mesh dimension ``dim`` at once (dim may be its name),
  each member on its own mesh group along ``dim``.

A graph holds only the plain data. Run elsewhere (an exported program in a new job, a compiled
one in another thread-rank), a ``ptd:<name>`` tag runs on the group of that name there when one
exists with the same ranks, and otherwise on c10d_func's own communicator for those ranks.

Under torch.compile the resolution runs once at trace time (see `resolve_group`) and its result is
baked into the graph as literals; eager calls and make_fx / export tracing run it as plain Python.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Union

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import _disable_current_modes

from ._registry import bind

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

__all__ = ["RANK_TYPES", "resolve_group"]

# The group types accepted by `group=`, named as in torch.distributed._functional_collectives.
RANK_TYPES = Union[
    list[int],
    list[list[int]],
    dist.ProcessGroup,
    "DeviceMesh",
    tuple["DeviceMesh", int | str],
    str,
]


def group_name(pg: dist.ProcessGroup) -> str:
    """The name torch registered `pg` under. A group written in Python may never have been told
    its name (torch hands the object itself back as the group), but torch's world records it."""
    try:
        return pg.group_name
    except RuntimeError:
        return dist.distributed_c10d._get_process_group_name(pg)


def _process_group_tag(pg: dist.ProcessGroup) -> str:
    # The name is agreed by every member of the group (torch derives it from the ranks and a
    # creation counter), so every member bakes the same tag into its graph. torch tags its own
    # groups "ptd:<name>" too.
    return f"ptd:{group_name(pg)}"


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
    if not -mesh.ndim <= dim < mesh.ndim:
        raise ValueError(
            f"c10d_func: mesh dimension {dim} is out of range for a {mesh.ndim}-D mesh"
        )
    return dim % mesh.ndim


def _mesh_group(mesh: DeviceMesh, dim: int) -> dist.ProcessGroup | None:
    """The caller's group along `dim`, or None for a mesh made without groups."""
    try:
        pg = mesh.get_group(dim)
    except (RuntimeError, ValueError, KeyError, AttributeError, AssertionError):
        return None
    return pg if isinstance(pg, dist.ProcessGroup) else None


def _from_mesh_dim(mesh: DeviceMesh, dim: int | str, tag: str) -> tuple[str, list[int], int]:
    dim = _mesh_dim(mesh, dim)
    size = mesh.size(dim)
    # Rows of this matrix are the groups along `dim` (every other coordinate fixed), so chunks of
    # `size` in its flattening are exactly those groups and one call serves all of them.
    # Plain arithmetic on the mesh's own rank tensor: no mode active while tracing (make_fx,
    # fake tensors) may record or intercept it.
    with _disable_current_modes():
        groups = mesh.mesh.transpose(dim, -1).reshape(-1, size)
        ranks = [int(r) for r in groups.flatten().tolist()]
    pg = _mesh_group(mesh, dim)
    if pg is not None:
        # Each member runs on its own mesh group (named in its graph by that group's tag), as
        # torch's functional collectives do; a graph run where the group does not exist falls
        # back to c10d_func's communicator for the same ranks.
        tag = tag or _process_group_tag(pg)
        bind(pg, tag, dist.get_process_group_ranks(pg))
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
        from torch.distributed.distributed_c10d import _resolve_process_group

        return _from_process_group(_resolve_process_group(group), tag)
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise ValueError(
                f"c10d_func: group= is a {group.ndim}-D DeviceMesh; pass (mesh, dim) to name the "
                "mesh dimension to run along"
            )
        return _from_mesh_dim(group, 0, tag)
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return _from_mesh_dim(group[0], group[1], tag)
    if group == dist.GroupMember.NON_GROUP_MEMBER:
        return _from_process_group(group, tag)
    raise TypeError(
        "c10d_func: group= must be a list of ranks, a list of equal-sized rank lists, a "
        "ProcessGroup, a group name, a 1-D DeviceMesh or (DeviceMesh, dim); "
        f"got {type(group).__name__}"
    )


# Dynamo runs this at trace time on the real arguments and bakes its result into the graph as
# constants: the group objects it reads (ProcessGroup, DeviceMesh and its rank tensor) cannot be
# traced, and binding a ProcessGroup must happen in the process that will run the graph, before
# it runs, which tracing on every rank guarantees.
@torch._dynamo.assume_constant_result
def _resolve_constant(group: RANK_TYPES, tag: str) -> tuple[str, list[int], int]:
    return _resolve(group, tag)


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
