"""Direct C calls of every op from inductor's C++ wrapper and AOTInductor packages.

Without this, generated C++ reaches a custom op through a boxed dispatcher call (`IValue`s
built per argument, `findSchemaOrThrow(...).callBoxed`), and AOTInductor through its proxy
executor (arguments serialised at compile time, parsed per call). torch's own ops get C shims
instead (`aoti_torch_cpu__c10d_functional_all_reduce_(...)`). The native library exports the
same kind of entry point for every c10d_func op, `aoti_torch_<device>_c10d_func_<op>`
(kernels/c_shims.cpp); here they are declared to inductor through its custom-op shim config
(`config.aot_inductor.custom_ops_to_c_shims`), which writes the declarations into the generated
source, and the lowerings' kernels (`direct_call_kernels`) emit the calls.

The generated code is not linked to anything of ours: its calls are resolved when it is loaded,
in a process where c10d_func is loaded (it must be: the ops are registered by it). The entry
points are exported by libc10d_func_c_shims, which libc10d_func loads global when it loads. C10D_FUNC_C_SHIMS=0 in the environment of the process that compiles turns the direct calls
off (back to inductor's boxed calls).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch

from . import _C


def enabled() -> bool:
    return os.environ.get("C10D_FUNC_C_SHIMS", "1") != "0"


@functools.cache
def _declarations() -> dict[Any, list[str]]:
    return {
        getattr(torch.ops.c10d_func, name).default: list(declarations)
        for name, declarations in _C.c_shim_declarations()
    }


def declare(config: Any) -> None:
    """Every op's C declarations (one per device) in inductor's custom-op shim config, unless
    C10D_FUNC_C_SHIMS=0. Called by every lowering of a collective, in the context that compiles:
    inductor's config values are per context in torch 2.14 (each a ContextVar), so declarations
    made where inductor's lowerings were first imported are not seen by a compile in another
    thread, as the full test suite showed (AOTInductor fell back to the proxy executor)."""
    if not enabled():
        return
    shims = config.aot_inductor.custom_ops_to_c_shims
    missing = {op: decls for op, decls in _declarations().items() if op not in shims}
    if missing:
        config.aot_inductor.custom_ops_to_c_shims = {**shims, **missing}


def direct_call_kernel() -> type:
    """The lowerings' IR class of collectives: inductor's collective kernel (its scheduler orders
    and overlaps them), whose C++ code calls the op's C entry point. Waits stay inductor's own
    `_WaitKernel` (inductor recognises a wait by that exact class), which calls torch's wait
    shim; it waits c10d_func's collectives through torch's work registry (docs/inductor.md). The Python wrapper, and
    a config without our declarations (a user replaced the dict), keep inductor's own code."""
    from torch._inductor import config, ir

    def emit(kernel: Any, wrapper: Any) -> bool:
        from torch._inductor.virtualized import V

        op = kernel.op_overload
        if not V.graph.cpp_wrapper or op not in config.aot_inductor.custom_ops_to_c_shims:
            return False
        device = kernel.get_device()
        shim = f"aoti_torch_{device.type if device else 'cpu'}_c10d_func_{op._opname}"
        kernel.codegen_comment(wrapper)
        args = [*kernel.codegen_args(), *kernel.codegen_kwargs()]
        name = kernel.get_name()
        if isinstance(kernel.layout, ir.NoneLayout):
            # In place: the op writes its argument and returns nothing.
            wrapper.writeline(f"AOTI_TORCH_ERROR_CODE_CHECK({shim}({', '.join(args)}));")
        elif isinstance(kernel.layout, ir.MultiOutputLayout):
            # Tensor[]: the caller's array, of the length the graph expects (checked by the shim).
            outputs = [output.get_name() for output in kernel.outputs]
            array = f"{name}_handles"
            if outputs:
                wrapper.writeline(f"AtenTensorHandle {array}[{len(outputs)}];")
            else:
                wrapper.writeline(f"AtenTensorHandle* {array} = nullptr;")
            call = ", ".join([*args, array, str(len(outputs))])
            wrapper.writeline(f"AOTI_TORCH_ERROR_CODE_CHECK({shim}({call}));")
            for index, output in enumerate(outputs):
                wrapper.writeline(f"RAIIAtenTensorHandle {output}({array}[{index}]);")
        else:
            handle = f"{name}_handle"
            wrapper.writeline(f"AtenTensorHandle {handle};")
            call = ", ".join([*args, f"&{handle}"])
            wrapper.writeline(f"AOTI_TORCH_ERROR_CODE_CHECK({shim}({call}));")
            wrapper.writeline(f"RAIIAtenTensorHandle {name}({handle});")
            kernel.codegen_size_asserts(wrapper)
        return True

    class DirectCollectiveKernel(ir._CollectiveKernel):
        def codegen(self, wrapper: Any) -> None:
            if not emit(self, wrapper):
                super().codegen(wrapper)

    return DirectCollectiveKernel
