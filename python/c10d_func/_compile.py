"""What torch's compile stack needs to be told about the ops, installed once at import: which
ops have side effects, and the inductor lowerings (_lowerings.py), installed when inductor's
lowering module loads. The passes of torch's that had to be patched are in _torch_patches.py."""

from __future__ import annotations

import torch

from ._import_hooks import after_import
from ._lowerings import ops_with_effects, register_lowerings


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
