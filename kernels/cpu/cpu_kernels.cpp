// CPU kernels: the device-generic kernels (ops/collective_kernels) registered for the CPU key.
// CPU tensors travel over the Gloo communicator (backend_communicator.cpp), built per chunk by
// the factory the Python package installs, or over any group bound with register_group.
#include "ops/collective_kernels.h"
#include "ops/register_kernels.h"

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, CPU, m) {
  C10D_FUNC_IMPL_EVERY_OP(m)
}

} // namespace c10d_func
