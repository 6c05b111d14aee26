"""Calls a ProcessGroup written in Python: c10d_func's collectives on its own methods.

torch's functional collectives run on any ProcessGroup subclass by calling its methods; so does
c10d_func, from C++ through `call_group_method`. The C++ virtual methods are not used: which of
them reach a Python override depends on the torch version (2.14 forwards `all_gather_single`, 2.11
`_allgather_base`, …), so the methods are looked up here by every name torch has used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["call_group_method", "is_python_group", "python_method"]

# Each collective c10d_func calls, with the method names a group may define for it, newest first.
_NAMES = {
    "allgather_base": ("all_gather_single", "_allgather_base"),
    "reduce_scatter_base": ("reduce_scatter_single", "_reduce_scatter_base"),
    "alltoall_base": ("all_to_all_single", "alltoall_base"),
}
# The coalesced forms torch's functional collectives also reach (a group may define only these:
# torch's own minimal test group does), called with one tensor each.
_COALESCED = {
    "allgather_base": "allgather_into_tensor_coalesced",
    "reduce_scatter_base": "reduce_scatter_tensor_coalesced",
}


def is_python_group(pg: dist.ProcessGroup) -> bool:
    return type(pg) is not dist.ProcessGroup


def python_method(pg: dist.ProcessGroup, *names: str) -> Callable[..., Any] | None:
    """The first of `names` that `pg`'s class defines in Python (not inherited from the C++
    ProcessGroup), bound to `pg`."""
    for name in names:
        defined = getattr(type(pg), name, None)
        if defined is not None and defined is not getattr(dist.ProcessGroup, name, None):
            return getattr(pg, name)
    return None


def traits(pg: dist.ProcessGroup) -> tuple[bool, bool]:
    """(has a reduce, has a reduce-scatter): what c10d_func composes otherwise."""
    has_reduce = python_method(pg, "reduce") is not None
    has_reduce_scatter = (
        python_method(
            pg, *_NAMES["reduce_scatter_base"], _COALESCED["reduce_scatter_base"], "reduce_scatter"
        )
        is not None
    )
    return has_reduce, has_reduce_scatter


def _native(work: Any) -> dist.Work:
    """A dist.Work C++ can keep: torch's own Works and Works written in Python (dist.Work
    subclasses, which C++ holds until the output is waited and waits then, once, as torch does)
    as they are; anything else (a duck-typed object, or None) as a Work over its future, waited
    here when it has none."""
    if isinstance(work, dist.Work):
        return work
    if work is not None:
        try:
            return torch._C._distributed_c10d._create_work_from_future(work.get_future())
        except (NotImplementedError, RuntimeError, AttributeError):
            work.wait()  # get_future is optional for a Work written in Python
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(None)
    return torch._C._distributed_c10d._create_work_from_future(done)


def _missing(pg: dist.ProcessGroup, collective: str, names: tuple[str, ...]) -> NotImplementedError:
    return NotImplementedError(
        f"c10d_func: process group {pg!r} ({type(pg).__name__}) defines none of "
        f"{', '.join(names)}, which {collective} needs"
    )


def call_group_method(pg: dist.ProcessGroup, collective: str, *args: Any) -> dist.Work:
    """Runs `collective` on `pg` through its own method; called by c10d_func's C++ side with
    torch's option objects (AllreduceOptions, …) as the group's methods take them."""
    n = pg.size()
    if collective == "allreduce":
        tensors, options = args
        work = pg.allreduce(tensors, options)
    elif collective == "allgather_base":
        output, input = args
        method = python_method(pg, *_NAMES[collective])
        coalesced = python_method(pg, _COALESCED[collective])
        if method is not None:
            work = method(output, input)
        elif coalesced is not None:
            work = coalesced([output], [input], torch._C._distributed_c10d.AllgatherOptions())
        elif python_method(pg, "allgather") is not None:
            work = pg.allgather([list(output.chunk(n))], [input])
        else:
            raise _missing(
                pg, "all_gather", (*_NAMES[collective], _COALESCED[collective], "allgather")
            )
    elif collective == "reduce_scatter_base":
        output, input, options = args
        method = python_method(pg, *_NAMES[collective])
        coalesced = python_method(pg, _COALESCED[collective])
        if method is not None:
            work = method(output, input, options)
        elif coalesced is not None:
            work = coalesced([output], [input], options)
        else:
            work = pg.reduce_scatter([output], [list(input.chunk(n))], options)
    elif collective == "alltoall_base":
        output, input, output_splits, input_splits = args
        method = python_method(pg, *_NAMES[collective])
        if method is None:
            raise _missing(pg, "all_to_all", _NAMES[collective])
        work = method(output, input, output_splits, input_splits)
    elif collective in ("broadcast", "reduce"):
        tensors, options = args
        work = getattr(pg, collective)(tensors, options)
    elif collective in ("gather", "scatter"):
        outputs, inputs, options = args
        work = getattr(pg, collective)(outputs, inputs, options)
    else:
        raise ValueError(f"c10d_func: unknown collective {collective!r}")
    return _native(work)
