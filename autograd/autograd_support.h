#pragma once
// What every backward formula shares: the group a collective ran in, kept in the autograd
// context so the backward runs the dual collective in the very same group; running an op below
// autograd (the forward of a Function); and the "not differentiable" error.
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/custom_function.h>

#include "transports/reduce_op.h"

#include <string>
#include <string_view>
#include <vector>

namespace c10d_func {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GroupArgs {
  std::string tag;
  std::vector<int64_t> ranks;
  int64_t group_size = 0;

  GroupArgs(std::string_view tag, at::IntArrayRef ranks, int64_t group_size)
      : tag(tag), ranks(ranks.vec()), group_size(group_size) {}

  void save(AutogradContext* ctx) const {
    ctx->saved_data["tag"] = tag;
    ctx->saved_data["ranks"] = ranks;
    ctx->saved_data["group_size"] = group_size;
  }

  static GroupArgs load(AutogradContext* ctx) {
    return GroupArgs(ctx->saved_data["tag"].toStringRef(), ctx->saved_data["ranks"].toIntVector(),
                     ctx->saved_data["group_size"].toInt());
  }
};

// True when autograd will record this call: grad mode on and an input that requires grad.
inline bool records_grad(at::TensorList inputs) {
  if (!at::GradMode::is_enabled()) {
    return false;
  }
  for (const auto& input : inputs) {
    if (input.defined() && input.requires_grad()) {
      return true;
    }
  }
  return false;
}

// The reduction is parsed once, where autograd first sees the call, and travels typed: any
// spelling the kernels accept ("SUM", "Sum") then means the same thing in backward.
inline void save_reduce_op(AutogradContext* ctx, ReduceOp reduce_op) {
  ctx->saved_data["reduce_op"] = static_cast<int64_t>(reduce_op);
}

inline ReduceOp load_reduce_op(AutogradContext* ctx) {
  return static_cast<ReduceOp>(ctx->saved_data["reduce_op"].toInt());
}

[[noreturn]] inline void not_differentiable(std::string_view op, ReduceOp reduce_op,
                                            std::string_view supported) {
  TORCH_CHECK(false, "c10d_func.", op, ": reduce_op '", reduce_op_name(reduce_op),
              "' is not differentiable (differentiable: ", supported,
              "); detach the input or use another reduction");
}

}  // namespace c10d_func
