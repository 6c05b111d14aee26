"""AsyncCollectiveTensor: the eager face of a pending collective output, and the choice between it
and an explicit wait.

The ops return as soon as the collective is issued; `wait_tensor` must run before the data is
read. In eager mode the API hands back an AsyncCollectiveTensor, which runs that wait itself on
the first operation that reads data, so communication overlaps with whatever the caller does in
between. While tracing (torch.compile, make_fx, torch.export) the API emits `wait_tensor` right
after the collective instead, so graphs hold only plain tensors and explicit waits, which
compilers may move.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed._functional_collectives as _torch_funcol
from torch.fx.experimental.proxy_tensor import get_proxy_mode

__all__ = ["AsyncCollectiveTensor", "wait_tensor", "wait_tensors", "wrap_output"]


def wait_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """Returns `tensor` once it is safe to read.

    On CPU this blocks until the collective writing it is done; on CUDA it makes the current
    stream wait for it. A tensor with no pending collective is returned at once.
    """
    if tensor is None:
        # What `out = all_reduce_(x, ...)` gives, written as for torch's op, which returns x.
        raise TypeError(
            "c10d_func.wait_tensor: got None. The in-place ops (all_reduce_, broadcast_, the out= "
            "forms) return nothing; wait the tensor they wrote: wait_tensor(x)"
        )
    return torch.ops.c10d_func.wait_tensor(tensor)


def wait_tensors(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """`wait_tensor` of every tensor of the list, in one call; returns the waited tensors."""
    return torch.ops.c10d_func.wait_tensors(list(tensors))


# torch's own class, not a look-alike: torch special-cases it by identity (AOTAutograd waits and
# unwraps it on graph inputs and tangents, Dynamo's guards unwrap it, DTensor and LocalTensorMode
# wait it), so every such place applies to c10d_func's outputs too. Its wait is torch's
# `_c10d_functional.wait_tensor`, which waits c10d_func's collectives as well: they are in
# torch's work registry (runtime/pending_work.h).
AsyncCollectiveTensor = _torch_funcol.AsyncCollectiveTensor


class _WrapAsync(torch.autograd.Function):
    """Identity for autograd: lets gradients reach the collective through the wrapper.

    (The collective's own backward is the op's Autograd kernel; this only joins the wrapper to it.)
    """

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return AsyncCollectiveTensor(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad


_PYTHON_DISPATCHER = torch._C.DispatchKey.PythonDispatcher
_PRE_DISPATCH = torch._C.DispatchKey.PreDispatch


def _no_mode_or_tracer_present() -> bool:
    """No TorchDispatchMode on the stack (fake tensors and make_fx's proxy mode are among them),
    and neither the Python dispatcher (AOTAutograd, export) nor pre-dispatch tracing (whose proxy
    mode sits on a stack of its own) switched on: three thread-local reads, about 0.2 µs. Not
    traceable by Dynamo: call it only once is_compiling() is False."""
    return (
        torch._C._len_torch_dispatch_stack() == 0
        and not torch._C._dispatch_tls_is_dispatch_key_included(_PYTHON_DISPATCHER)
        and not torch._C._dispatch_tls_is_dispatch_key_included(_PRE_DISPATCH)
    )


def _are_we_tracing() -> bool:
    """True under dynamo, fake tensors, the python dispatcher (AOT) or make_fx/export tracing."""
    if torch.compiler.is_compiling():
        return True
    # The common eager call, answered without the checks below one by one (0.6 µs on every call).
    if _no_mode_or_tracer_present():
        return False
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return True
    # Set while AOTAutograd / export retrace through the python dispatcher.
    if torch._C._dispatch_tls_is_dispatch_key_included(_PYTHON_DISPATCHER):
        return True
    return get_proxy_mode() is not None


def wrap_output(tensor: torch.Tensor) -> torch.Tensor:
    """What the API returns for a collective's output: an explicit wait while tracing, else an
    AsyncCollectiveTensor that waits on first use."""
    if _are_we_tracing():
        return wait_tensor(tensor)
    if tensor.requires_grad and torch.is_grad_enabled():
        return _WrapAsync.apply(tensor)
    return AsyncCollectiveTensor(tensor)
