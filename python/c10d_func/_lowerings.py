"""Inductor lowerings of every c10d_func op, as inductor lowers torch's own functional
collectives: collectives as `ir._CollectiveKernel`, waits as `ir._WaitKernel`, so inductor's
scheduler knows them (global ordering of collectives, overlap) and its C++ wrapper and
AOTInductor emit them. Registered when inductor's lowering module is imported (_compile.py)."""

from __future__ import annotations

from typing import Any

import torch

from . import _C, _c_shims


# How each op is lowered, from the native module's one list of operators (ops/op_list.h):
# out_of_place (the op allocates its output: shapes depend on the group), in_place (it writes a
# buffer inductor owns: reached from re-inplacing and from mutations in user code), reinplaced
# (a functional op whose output has its input's shape, lowered as torch lowers its own: a clone
# of the input, which inductor folds into the kernel that produced it, and the in-place op of the
# same name + "_" on that buffer, so the result is returned with no extra copy), or wait.
def _ops_by_lowering() -> dict[str, list[str]]:
    by_kind: dict[str, list[str]] = {}
    for name, kind, _ in _C.op_table():
        by_kind.setdefault(kind, []).append(name)
    return by_kind


def ops_with_effects() -> list[str]:
    """Ops that dead-code elimination must keep even when their output is unused: a wait
    completes a collective, and a message's peer waits for it."""
    return [name for name, _, effects in _C.op_table() if effects == "effects"]


def register_lowerings() -> None:
    """Lowers the ops as inductor lowers its own functional collectives: each collective as a
    `_CollectiveKernel` and each wait as a `_WaitKernel`. As plain fallback kernels they would be
    ordinary extern calls, which inductor's scheduling passes may reorder by buffer sizes, and
    sizes differ between ranks (uneven splits), so ranks could issue collectives in different
    orders and deadlock. A wait lowered as a fresh output (what the schema says) would also let
    inductor reuse the collective's buffer while the wait's result, the same storage, is live."""
    from torch._inductor import config, ir
    from torch._inductor.lowering import (
        add_layout_constraint,
        clone,
        constrain_to_fx_strides,
        lowerings,
        register_lowering,
    )
    from torch._inductor.virtualized import V

    ops = torch.ops.c10d_func
    if ops.wait_tensor.default in lowerings:
        return
    by_kind = _ops_by_lowering()
    # The C++ wrapper and AOTInductor call each collective's C entry point (_c_shims.py).
    collective_kernel = _c_shims.direct_call_kernel()
    # A collective without a lowering would become a plain extern kernel, which inductor may
    # reorder differently on different ranks: refuse to start rather than deadlock later.
    unknown = set(by_kind) - {"out_of_place", "in_place", "reinplaced", "wait"}
    if unknown:
        raise RuntimeError(f"c10d_func: no inductor lowering of kind {sorted(unknown)}")

    def contiguous(inputs: Any) -> Any:
        if isinstance(inputs, (list, tuple)):
            return [ir.ExternKernel.require_contiguous(t) for t in inputs]
        return ir.ExternKernel.require_contiguous(inputs)

    def lower_out_of_place(op: Any) -> None:
        def lower(inputs: Any, *args: Any) -> Any:
            if op is ops.batch_p2p_ops:  # (op_list, peer_list, tag_list, tensors, group...)
                args = (*args[:2], contiguous(args[2]), *args[3:])
            else:
                inputs = contiguous(inputs)
            _c_shims.declare(config)
            node = collective_kernel.create_out_of_place(op.default, inputs, *args)
            if isinstance(node, list):
                return [ir.TensorBox.create(output) for output in node]
            return ir.TensorBox.create(node)

        add_layout_constraint(op, constrain_to_fx_strides)
        register_lowering(op)(lower)

    def lower_in_place(op: Any) -> None:
        def lower(inputs: Any, *args: Any, **kwargs: Any) -> Any:
            _c_shims.declare(config)
            collective_kernel.create_inplace(op.default, inputs, *args, **kwargs)
            # The schema returns nothing, but inductor's re-inplacing pass retargets a functional
            # node to its in-place op and keeps the node's users (the wait): they get the buffer
            # the op wrote, as with torch's in-place ops, which return it.
            return kwargs.get("out", inputs)

        add_layout_constraint(op, constrain_to_fx_strides)
        if op.default._schema.arguments[-1].name == "out":
            # register_lowering's wrapper refuses an `out=` keyword for every op outside aten's
            # fallbacks and the `_c10d_functional` namespace (by name, in lowering.py); the
            # wrapper does nothing else these ops need, so the lowering is installed directly.
            lowerings[op.default] = lower
        else:
            register_lowering(op)(lower)

    def lower_reinplaced(op: Any, in_place: Any) -> None:
        def lower(inputs: Any, *args: Any) -> Any:
            many = isinstance(inputs, (list, tuple))
            buffers = [clone(t) for t in (inputs if many else [inputs])]
            if config.reorder_for_compute_comm_overlap:
                # As torch does for its own: a clone fused horizontally with other kernels would
                # delay the collective, which should be issued as early as possible.
                for buffer in buffers:
                    buffer.realize()
                    V.graph.no_fuse_buffer_names.add(buffer.get_name())
            buffers = contiguous(buffers)
            _c_shims.declare(config)
            collective_kernel.create_inplace(
                in_place.default, buffers if many else buffers[0], *args
            )
            return buffers if many else buffers[0]

        add_layout_constraint(op, constrain_to_fx_strides)
        register_lowering(op)(lower)

    for name in by_kind.get("out_of_place", []):
        lower_out_of_place(getattr(ops, name))
    for name in by_kind.get("in_place", []):
        lower_in_place(getattr(ops, name))
    for name in by_kind.get("reinplaced", []):
        lower_reinplaced(getattr(ops, name), getattr(ops, name + "_"))

    @register_lowering(ops.wait_tensor)
    def _wait_tensor(inp: Any) -> Any:
        ir._WaitKernel.create_wait(ops.wait_tensor.default, inp)
        return inp
