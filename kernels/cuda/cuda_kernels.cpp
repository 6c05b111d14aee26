// CUDA kernels: the device-generic kernels (kernels/collective_kernels) registered for the CUDA key,
// and the NCCL transport registered as the CUDA default (Gloo is the alternative, see
// c10d_func.set_transport and C10D_FUNC_CUDA_TRANSPORT).
#include "kernels/cuda/nccl/nccl_communicator.h"
#include "ops/group_registry.h"
#include "kernels/collective_kernels.h"
#include "ops/register_kernels.h"

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, CUDA, m) {
  C10D_FUNC_IMPL_EVERY_OP(m)
}

} // namespace c10d_func

namespace {

const bool kNcclTransportAdded = [] {
  c10d_func::GroupRegistry::instance().add_transport(
      c10::DeviceType::CUDA,
      c10d_func::Transport{"nccl", &c10d_func::make_nccl_communicator, /*splits_world=*/true});
  return true;
}();

} // namespace
