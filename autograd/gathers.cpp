// Backward formulas of the gather/scatter family.
//
// all_gather_into_tensor <-> reduce_scatter_tensor(sum): each is the other's backward
// reduce_scatter_tensor avg -> all_gather of the gradient ÷ group_size; other reductions raise
// gather(dst)  -> scatter(src=dst) of dst's gradient (only dst's output depends on the inputs)
// scatter(src) -> gather(dst=src) of the gradients (only src's input is read; others get zeros)
// coalesced variants: per element
#include <ATen/ATen.h>

#include "autograd/autograd_kernels.h"
#include "autograd/autograd_support.h"
#include "ops/op_handles.h"

namespace c10d_func {
namespace autograd_kernels {

class AllGatherFunction : public torch::autograd::Function<AllGatherFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const GroupArgs& group) {
    group.save(ctx);
    ctx->saved_data["input_sizes"] = self.sizes().vec();
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::all_gather_into_tensor(self, group.tag, group.ranks, group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    at::Tensor grad = handles::wait_tensor(
        handles::reduce_scatter_tensor(grads[0], "sum", group.tag, group.ranks, group.group_size));
    return {grad.reshape(ctx->saved_data["input_sizes"].toIntVector()), at::Tensor()};
  }
};

class ReduceScatterFunction : public torch::autograd::Function<ReduceScatterFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, ReduceOp reduce_op,
                            const GroupArgs& group) {
    if (reduce_op != ReduceOp::kSum && reduce_op != ReduceOp::kAvg) {
      not_differentiable("reduce_scatter_tensor", reduce_op, "sum, avg");
    }
    group.save(ctx);
    ctx->saved_data["avg"] = reduce_op == ReduceOp::kAvg;
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::reduce_scatter_tensor(self, reduce_op_name(reduce_op), group.tag, group.ranks,
                                          group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    at::Tensor grad = handles::wait_tensor(
        handles::all_gather_into_tensor(grads[0], group.tag, group.ranks, group.group_size));
    if (ctx->saved_data["avg"].toBool()) {
      grad = grad / group.group_size;
    }
    return {grad, at::Tensor(), at::Tensor()};
  }
};

class GatherFunction : public torch::autograd::Function<GatherFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, int64_t dst,
                            const GroupArgs& group) {
    group.save(ctx);
    ctx->saved_data["dst"] = dst;
    ctx->saved_data["input_sizes"] = self.sizes().vec();
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::gather(self, dst, group.tag, group.ranks, group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    at::Tensor grad =
        handles::wait_tensor(handles::scatter(grads[0].contiguous(), ctx->saved_data["dst"].toInt(),
                                              group.tag, group.ranks, group.group_size));
    return {grad.reshape(ctx->saved_data["input_sizes"].toIntVector()), at::Tensor(), at::Tensor()};
  }
};

class ScatterFunction : public torch::autograd::Function<ScatterFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, int64_t src,
                            const GroupArgs& group) {
    group.save(ctx);
    ctx->saved_data["src"] = src;
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::scatter(self, src, group.tag, group.ranks, group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    at::Tensor grad = handles::wait_tensor(handles::gather(
        grads[0], ctx->saved_data["src"].toInt(), group.tag, group.ranks, group.group_size));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

at::Tensor all_gather_into_tensor(const at::Tensor& self, c10::string_view tag,
                                  at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::all_gather_into_tensor(self, tag, ranks, group_size);
  }
  return AllGatherFunction::apply(self, GroupArgs(tag, ranks, group_size));
}

at::Tensor reduce_scatter_tensor(const at::Tensor& self, c10::string_view reduce_op,
                                 c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::reduce_scatter_tensor(self, reduce_op, tag, ranks, group_size);
  }
  return ReduceScatterFunction::apply(self, parse_reduce_op("reduce_scatter_tensor", reduce_op),
                                      GroupArgs(tag, ranks, group_size));
}

std::vector<at::Tensor> all_gather_into_tensor_coalesced(at::TensorList self, c10::string_view tag,
                                                         at::IntArrayRef ranks,
                                                         int64_t group_size) {
  if (records_grad(self)) {
    std::vector<at::Tensor> outputs;
    for (const auto& tensor : self) {
      outputs.push_back(handles::all_gather_into_tensor(tensor, tag, ranks, group_size));
    }
    return outputs;
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return handles::all_gather_into_tensor_coalesced(self, tag, ranks, group_size);
}

std::vector<at::Tensor> reduce_scatter_tensor_coalesced(at::TensorList self,
                                                        c10::string_view reduce_op,
                                                        c10::string_view tag, at::IntArrayRef ranks,
                                                        int64_t group_size) {
  if (records_grad(self)) {
    std::vector<at::Tensor> outputs;
    for (const auto& tensor : self) {
      outputs.push_back(handles::reduce_scatter_tensor(tensor, reduce_op, tag, ranks, group_size));
    }
    return outputs;
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return handles::reduce_scatter_tensor_coalesced(self, reduce_op, tag, ranks, group_size);
}

at::Tensor gather(const at::Tensor& self, int64_t dst, c10::string_view tag, at::IntArrayRef ranks,
                  int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::gather(self, dst, tag, ranks, group_size);
  }
  return GatherFunction::apply(self, dst, GroupArgs(tag, ranks, group_size));
}

at::Tensor scatter(const at::Tensor& self, int64_t src, c10::string_view tag, at::IntArrayRef ranks,
                   int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::scatter(self, src, tag, ranks, group_size);
  }
  return ScatterFunction::apply(self, src, GroupArgs(tag, ranks, group_size));
}

}  // namespace autograd_kernels

}  // namespace c10d_func
