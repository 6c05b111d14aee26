#pragma once
// Checks on the tensors of a call that every dispatch key shares (CPU, CUDA and Meta alike).
#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <string_view>

namespace c10d_func {

// A coalesced call runs on one device: every tensor of `tensors` must be on the first one's.
void check_same_device(std::string_view op, at::TensorList tensors);

// The `out` of an _out op must have the shape the op produces, and `self`'s dtype and device.
void check_out(std::string_view op, const at::Tensor& self, const at::Tensor& out,
               c10::SymIntArrayRef expected_shape);

// op_list of batch_p2p_ops: "isend" or "irecv" each, and every list of the same length.
void check_message_lists(std::string_view op, c10::ArrayRef<std::string> op_list, size_t peers,
                         size_t tags, size_t tensors);

}  // namespace c10d_func
