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
from torch.fx.experimental.proxy_tensor import get_proxy_mode
from torch.utils._pytree import tree_map_only
from typing_extensions import Self

__all__ = ["AsyncCollectiveTensor", "wait_tensor", "wait_tensors", "wrap_output"]


def wait_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """Returns `tensor` once it is safe to read.

    On CPU this blocks until the collective writing it is done; on CUDA it makes the current
    stream wait for it. A tensor with no pending collective is returned at once.
    """
    return torch.ops.c10d_func.wait_tensor(tensor)


def wait_tensors(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """`wait_tensor` of every tensor of the list, in one call; returns the waited tensors."""
    return torch.ops.c10d_func.wait_tensors(list(tensors))


def _is_view_op(func: torch._ops.OpOverload) -> bool:
    # A view's first argument is a non-writing alias of its output. CompositeImplicitAutograd
    # "views" may compute instead of aliasing (torch issue 133421), so they count as reads.
    if torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
    ):
        return False
    arguments = func._schema.arguments
    if not arguments:
        return False
    alias = arguments[0].alias_info
    return alias is not None and not alias.is_write


class AsyncCollectiveTensor(torch.Tensor):
    """A collective's output whose data may still be in flight.

    Shape, dtype, device, strides and view operations are available at once and never wait;
    a view of a pending output is itself pending and waits when its data is read. The first
    operation that reads data (arithmetic, printing, ``.tolist()``, ``.numpy()``, ``.item()``,
    comparisons, …) waits for the collective and then runs on the plain result, which is what
    it returns; the wait happens once. ``.wait()`` returns the plain tensor. Outputs dropped
    without being read are safe: the pending collective keeps what it needs alive.
    """

    elem: torch.Tensor
    completed: bool

    __slots__ = ["completed", "elem"]

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> Self:
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=elem.device,
            # As torch's: a wrapper of an output that requires grad does too (the API wraps such
            # outputs through _WrapAsync, which also links the wrapper into the graph).
            requires_grad=elem.requires_grad,
        )
        wrapper.elem = elem
        wrapper.completed = False
        return wrapper

    def trigger_wait(self) -> torch.Tensor:
        """Waits (once) and returns the plain tensor."""
        if not self.completed:
            # Not reassigned to elem: called inside __torch_dispatch__ (below autograd) the wait's
            # output carries no autograd history, which wait() must keep.
            waited = wait_tensor(self.elem)
            self.completed = True
            return waited
        return self.elem

    def wait(self) -> torch.Tensor:
        """Waits for the collective and returns its output as a plain tensor.

        The result stays connected to autograd through the collective's own backward.
        """
        return wait_tensor(self.elem)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return f"AsyncCollectiveTensor({self.trigger_wait()})"

    def tolist(self) -> Any:
        return self.trigger_wait().tolist()

    def numpy(self, *, force: bool = False) -> Any:  # type: ignore[override]
        return self.wait().numpy(force=force)

    # Subclass protocol, so torch.compile can take an AsyncCollectiveTensor as a graph input.
    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["elem"], None

    @staticmethod
    def __tensor_unflatten__(
        inner_tensors: dict[str, torch.Tensor], meta: None, outer_size: Any, outer_stride: Any
    ) -> AsyncCollectiveTensor:
        return AsyncCollectiveTensor(inner_tensors["elem"])

    def __coerce_same_metadata_as_tangent__(
        self, expected_metadata: Any, expected_type: type | None = None
    ) -> torch.Tensor | None:
        # A compiled backward that expects a plain tangent gets the waited tensor.
        if expected_type is not torch.Tensor:
            return None
        return self.trigger_wait()

    @classmethod
    def __torch_dispatch__(
        cls,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if _is_view_op(func):
            # Metadata-only: run on the pending tensor and keep the result pending.
            out = func(
                *tree_map_only(cls, lambda t: t.elem, args),
                **tree_map_only(cls, lambda t: t.elem, kwargs or {}),
            )
            return tree_map_only(torch.Tensor, cls, out)
        return func(
            *tree_map_only(cls, cls.trigger_wait, args),
            **tree_map_only(cls, cls.trigger_wait, kwargs or {}),
        )


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


def _are_we_tracing() -> bool:
    """True under dynamo, fake tensors, the python dispatcher (AOT) or make_fx/export tracing."""
    if torch.compiler.is_compiling():
        return True
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return True
    # Set while AOTAutograd / export retrace through the python dispatcher.
    if torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.PythonDispatcher):
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
