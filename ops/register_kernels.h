#pragma once
// Registers the device-generic kernels for one dispatch key; used by kernels/cpu and kernels/cuda
// so the list of operators is written once.
#include <torch/library.h>

#include "ops/collective_kernels.h"

namespace c10d_func {

inline void register_collective_kernels(torch::Library& m) {
  m.impl("all_reduce", &all_reduce);
  m.impl("all_reduce_", &all_reduce_);
  m.impl("all_reduce_coalesced", &all_reduce_coalesced);
  m.impl("all_gather_into_tensor", &all_gather_into_tensor);
  m.impl("all_gather_into_tensor_coalesced", &all_gather_into_tensor_coalesced);
  m.impl("reduce_scatter_tensor", &reduce_scatter_tensor);
  m.impl("reduce_scatter_tensor_coalesced", &reduce_scatter_tensor_coalesced);
  m.impl("all_to_all_single", &all_to_all_single);
  m.impl("broadcast", &broadcast);
  m.impl("broadcast_", &broadcast_);
  m.impl("reduce", &reduce);
  m.impl("gather", &gather);
  m.impl("scatter", &scatter);
  m.impl("permute", &permute);
  m.impl("wait_tensor", &wait_tensor);
}

} // namespace c10d_func
