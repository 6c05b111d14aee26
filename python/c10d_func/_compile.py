"""What torch's compile stack needs to be told about the ops, installed once at import: which
ops have side effects, the inductor lowerings (_lowerings.py) and inductor's passes
(_inductor_passes.py), both installed when inductor loads, and the alias exemption of
wait_tensor."""

from __future__ import annotations

import warnings

import torch

from . import _inductor_passes
from ._import_hooks import after_import
from ._lowerings import ops_with_effects, register_lowerings


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
    # A wait is the point where the collective's result becomes visible; like torch's own
    # wait_tensor it must survive dead-code elimination even when its output is unused, or the
    # collective it completes could be left pending (or dropped) on some ranks only. Messages
    # likewise: an isend whose handle is never read still has a receiver waiting for it.
    for name in ops_with_effects():
        op = getattr(torch.ops.c10d_func, name)
        torch.fx.node.has_side_effect(op)
        torch.fx.node.has_side_effect(op.default)

    after_import("torch._inductor.lowering", register_lowerings)
    _inductor_passes.install()

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
