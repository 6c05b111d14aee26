#pragma once
// Checks on the tensors of a call that every dispatch key shares (CPU, CUDA and Meta alike).
#include <ATen/core/Tensor.h>

#include <string_view>

namespace c10d_func {

// A coalesced call runs on one device: every tensor of `tensors` must be on the first one's.
void check_same_device(std::string_view op, at::TensorList tensors);

} // namespace c10d_func
