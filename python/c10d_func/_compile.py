"""What torch's compile stack needs to be told about the ops, installed once at import."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any

import torch

_LOWERING_MODULE = "torch._inductor.lowering"


# The out-of-place collectives; the in-place variants never reach inductor (functionalization
# rewrites them into these).
_COLLECTIVES = (
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced",
    "all_to_all_single",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "permute",
)


def _register_lowerings() -> None:
    """Lowers the ops as inductor lowers its own functional collectives: each collective as a
    `_CollectiveKernel` and each wait as a `_WaitKernel`. As plain fallback kernels they would be
    ordinary extern calls, which inductor's scheduling passes may reorder by buffer sizes, and
    sizes differ between ranks (uneven splits), so ranks could issue collectives in different
    orders and deadlock. A wait lowered as a fresh output (what the schema says) would also let
    inductor reuse the collective's buffer while the wait's result, the same storage, is live."""
    from torch._inductor import ir
    from torch._inductor.lowering import (
        add_layout_constraint,
        constrain_to_fx_strides,
        lowerings,
        register_lowering,
    )

    ops = torch.ops.c10d_func
    if ops.wait_tensor.default in lowerings:
        return

    def lower_collective(op: Any) -> None:
        def lower(inputs: Any, *args: Any) -> Any:
            if isinstance(inputs, (list, tuple)):
                inputs = [ir.ExternKernel.require_contiguous(t) for t in inputs]
            else:
                inputs = ir.ExternKernel.require_contiguous(inputs)
            node = ir._CollectiveKernel.create_out_of_place(op.default, inputs, *args)
            if isinstance(node, list):
                return [ir.TensorBox.create(output) for output in node]
            return ir.TensorBox.create(node)

        add_layout_constraint(op, constrain_to_fx_strides)
        register_lowering(op)(lower)

    for name in _COLLECTIVES:
        lower_collective(getattr(ops, name))

    @register_lowering(ops.wait_tensor)
    def _wait_tensor(inp: Any) -> Any:
        ir._WaitKernel.create_wait(ops.wait_tensor.default, inp)
        return inp


class _LowerWhenInductorLoads(importlib.abc.MetaPathFinder):
    """Registers the lowerings once inductor's lowering module is imported, so `import
    c10d_func` does not pay for importing inductor (about 1.5 s) in programs that never use it."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _LOWERING_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            _register_lowerings()

        spec.loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


def _exempt_wait_from_alias_check() -> None:
    try:
        from torch._functorch._aot_autograd import runtime_wrappers
    except ImportError:
        return
    check = getattr(runtime_wrappers, "_check_custom_op_aliasing", None)
    if check is None or getattr(check, "_c10d_func_exempt", False):
        return

    def check_except_wait(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name in ("c10d_func::wait_tensor", "c10d_func::wait_tensor.default"):
            return None
        return check(name, *args, **kwargs)

    check_except_wait._c10d_func_exempt = True  # type: ignore[attr-defined]
    runtime_wrappers._check_custom_op_aliasing = check_except_wait


def install() -> None:
    wait = torch.ops.c10d_func.wait_tensor
    # A wait is the point where the collective's result becomes visible; like torch's own
    # wait_tensor it must survive dead-code elimination even when its output is unused, or the
    # collective it completes could be left pending (or dropped) on some ranks only.
    torch.fx.node.has_side_effect(wait)
    torch.fx.node.has_side_effect(wait.default)

    if _LOWERING_MODULE in sys.modules:
        _register_lowerings()
    else:
        sys.meta_path.insert(0, _LowerWhenInductorLoads())

    # `wait_tensor(Tensor self) -> Tensor` returns the collective's buffer, which is its input,
    # as torch's own `_c10d_functional.wait_tensor` does (a copy per wait would cost a memcpy of
    # every collective's output). AOT autograd checks at run time that custom ops' outputs do not
    # alias their inputs (a warning, an error where CI is set, an error everywhere in a future
    # torch) and exempts only torch's collective namespaces, by name, with no public way to
    # declare another op's alias: `Tensor(a) self -> Tensor(a)` is refused by functionalization
    # for custom ops. So c10d_func.wait_tensor gets the same exemption, and only it: every other
    # custom op is still checked. The Meta kernel returns a fresh tensor, so traced graphs see a
    # functional op; see tests/python/test_opcheck.py and docs/collectives.md.
    _exempt_wait_from_alias_check()
    # Fallback for torch versions without that hook: silence exactly this warning.
    warnings.filterwarnings(
        "ignore",
        message=r"c10d_func::wait_tensor\b.*The output of this custom operator",
        category=UserWarning,
    )
