// CPU kernels: the device-generic kernels (kernels/collective_kernels) registered for the CPU key.
// CPU tensors travel over shared memory between the processes of one host (transports/shm), over
// Gloo (transports/gloo) across hosts, or over any group bound with register_group; see
// runtime/builtin_transports.cpp.
#include "ops/op_list.h"
#include "ops/op_signatures.h"

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, CPU, m) {
  C10D_FUNC_IMPL_EVERY_OP(m)
}

}  // namespace c10d_func
