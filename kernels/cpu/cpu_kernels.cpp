// CPU kernels: the device-generic kernels (kernels/collective_kernels) registered for the CPU key.
// CPU tensors travel over shared memory between the processes of one host (kernels/cpu/shm), over
// Gloo (kernels/cpu/gloo, built per chunk by the factory the Python package installs) across
// hosts, or over any group bound with register_group.
#include "kernels/collective_kernels.h"
#include "ops/register_kernels.h"

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, CPU, m) {
  C10D_FUNC_IMPL_EVERY_OP(m)
}

} // namespace c10d_func
