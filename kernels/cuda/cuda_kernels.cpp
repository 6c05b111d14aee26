// CUDA kernels: the device-generic kernels (kernels/collective_kernels) registered for the CUDA
// key. CUDA tensors travel over NCCL (the default) or Gloo; see runtime/builtin_transports.cpp.
#include "ops/op_list.h"
#include "ops/op_signatures.h"

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, CUDA, m) {
  C10D_FUNC_IMPL_EVERY_OP(m)
}

}  // namespace c10d_func
