"""Inductor's passes that name torch's functional collectives, made to apply to c10d_func's.

Most of inductor's collective handling keys on its IR classes, which c10d_func's lowerings use
(_lowerings.py): the global ordering of collectives, the overlap of collectives with compute
(`simple_overlap`, on by default), peak-memory reordering, and the waits of the C++ wrapper and
AOTInductor (through torch's work registry). Three places name torch's ops instead; each is
reached here through the table it keeps or, where it keeps none, by wrapping the module-level
function that inductor looks up at call time. Each is applied only where the torch in use has
it, so an older or newer torch without it simply keeps its own behaviour. docs/inductor.md lists
every place, these three and the passes c10d_func cannot reach.
"""

from __future__ import annotations

from typing import Any

import torch

from ._import_hooks import after_import


def _reinplace_collectives() -> None:
    """Inductor's re-inplacing pass turns `all_reduce(buf)` into `all_reduce_(buf)` when `buf` is
    dead afterwards (an extern kernel's output, say), so the collective writes the buffer with no
    copy. Its table names torch's ops; ours go into the same table, with the same in-place ops."""
    from torch._inductor.fx_passes import reinplace

    table = getattr(reinplace, "inplaceable_ops", None)
    inplaceable = getattr(reinplace, "InplaceableOp", None)
    if table is None or inplaceable is None:
        return
    ops = torch.ops.c10d_func
    table[ops.all_reduce.default] = inplaceable(ops.all_reduce_.default, 0)
    table[ops.all_reduce_coalesced.default] = inplaceable(ops.all_reduce_coalesced_.default, 0)


def _keep_waits_apart_from_their_collectives() -> None:
    """`reorder_for_locality` (inference graphs) moves every node next to its first user, except
    torch's wait_tensor, which it leaves in place: a collective moved to just before its wait
    could no longer overlap with the compute between them. The check names torch's wait only, so
    around the pass c10d_func's waits carry torch's target, and get their own back after."""
    from torch._inductor.fx_passes import post_grad

    reorder = getattr(post_grad, "reorder_for_locality", None)
    if reorder is None or getattr(reorder, "_c10d_func", False):
        return
    ours, theirs = (
        torch.ops.c10d_func.wait_tensor.default,
        torch.ops._c10d_functional.wait_tensor.default,
    )

    def reorder_keeping_waits(graph: torch.fx.Graph) -> Any:
        waits = list(graph.find_nodes(op="call_function", target=ours))
        for node in waits:
            node.target = theirs
        try:
            return reorder(graph)
        finally:
            for node in waits:
                node.target = ours

    reorder_keeping_waits._c10d_func = True  # type: ignore[attr-defined]
    post_grad.reorder_for_locality = reorder_keeping_waits


def _group_size_for_runtime_estimates() -> None:
    """Inductor's runtime estimate of a collective (comm_analysis, used by the overlap reordering
    passes and inductor's metrics) reads the group from the kernel's last argument as a torch
    group name; c10d_func's last argument is the group size itself."""
    from torch._inductor import comm_analysis

    group_size = getattr(comm_analysis, "get_collective_group_size", None)
    if group_size is None or getattr(group_size, "_c10d_func", False):
        return

    def group_size_of(node: Any) -> int:
        op = getattr(node, "op_overload", None)
        if getattr(op, "namespace", None) == "c10d_func":
            return int(node.constant_args[-1])
        return group_size(node)

    group_size_of._c10d_func = True  # type: ignore[attr-defined]
    comm_analysis.get_collective_group_size = group_size_of


def install() -> None:
    after_import("torch._inductor.fx_passes.reinplace", _reinplace_collectives)
    after_import("torch._inductor.fx_passes.post_grad", _keep_waits_apart_from_their_collectives)
    after_import("torch._inductor.comm_analysis", _group_size_for_runtime_estimates)
