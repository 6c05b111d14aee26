#pragma once
// Direct C entry points for compiled programs: inductor's C++ wrapper and AOTInductor packages
// call every c10d_func op through `aoti_torch_<device>_c10d_func_<op>` (C linkage, tensors as
// AtenTensorHandle, lists as pointer + length), as they call torch's own ops through its C shims,
// instead of packing IValues for a boxed dispatcher call (or, in AOTInductor, serialising the
// arguments for the proxy executor). Each entry point makes the op's typed dispatcher call, so
// autograd, the profiler and fake tensors see the same op as from Python.
//
// The declarations are written once, in kernels/c_shims.cpp; the Python package hands them to
// inductor (config.aot_inductor.custom_ops_to_c_shims), which writes them into the generated
// source: a call that does not match its declaration fails to compile there, and a definition
// that does not match fails to compile here.
#include <string>
#include <vector>

namespace c10d_func {

struct CShimDeclaration {
  std::string op;                         // the op's name, e.g. "all_reduce"
  std::vector<std::string> declarations;  // one per device (cpu, cuda): "AOTITorchError f(...)"
};

// Every op's C entry points, in the op list's order.
std::vector<CShimDeclaration> c_shim_declarations();

}  // namespace c10d_func
