// Backward formulas of the reductions: all_reduce (+ in-place and coalesced) and reduce.
//
// all_reduce  sum     -> all_reduce(sum) of the gradient
//             avg     -> all_reduce(avg) of the gradient
//             max/min -> the summed gradient routed to the elements that won; an element tied
//                        across k members gets 1/k of it on each (as torch.amax splits ties)
//             product -> summed gradient x the product of the OTHER members' values, computed
//                        exactly when zeros are present (no division by zero, no NaN)
//             bitwise -> not differentiable (integer inputs cannot require grad anyway)
// reduce      sum/avg -> broadcast of dst's gradient (÷ group_size for avg); others raise
// In-place variants record the functional op followed by copy_, so PyTorch's own in-place rules
// apply (a leaf that requires grad raises, versions are bumped).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>

#include "autograd/autograd_kernels.h"
#include "autograd/autograd_support.h"
#include "ops/op_handles.h"

namespace c10d_func {
namespace autograd_kernels {

class AllReduceFunction : public torch::autograd::Function<AllReduceFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, ReduceOp reduce_op,
                            const GroupArgs& group) {
    if (is_bitwise(reduce_op)) {
      not_differentiable("all_reduce", reduce_op, "sum, avg, max, min, product");
    }
    at::Tensor output;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      output = handles::all_reduce(self, reduce_op_name(reduce_op), group.tag, group.ranks,
                                   group.group_size);
    }
    group.save(ctx);
    save_reduce_op(ctx, reduce_op);
    if (reduce_op != ReduceOp::kSum && reduce_op != ReduceOp::kAvg) {
      ctx->save_for_backward({self, output});  // max, min and product route by the values
    }
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    const ReduceOp reduce_op = load_reduce_op(ctx);
    const at::Tensor& grad = grads[0];
    auto all_reduce = [&](const at::Tensor& t, ReduceOp op) {
      return handles::wait_tensor(
          handles::all_reduce(t, reduce_op_name(op), group.tag, group.ranks, group.group_size));
    };
    if (reduce_op == ReduceOp::kSum || reduce_op == ReduceOp::kAvg) {
      return {all_reduce(grad, reduce_op), at::Tensor(), at::Tensor()};
    }
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor output = handles::wait_tensor(saved[1]);
    const at::Tensor total = all_reduce(grad, ReduceOp::kSum);
    if (reduce_op == ReduceOp::kMax || reduce_op == ReduceOp::kMin) {
      const at::Tensor won = input.eq(output).to(grad.scalar_type());
      const at::Tensor winners = all_reduce(won, ReduceOp::kSum);
      return {total * won / winners, at::Tensor(), at::Tensor()};
    }
    // product: d(prod_s x_s)/dx_r = prod_{s != r} x_s, from the number of zeros and the product
    // of the non-zero values, so zeros give exact gradients.
    const at::Tensor is_zero = input.eq(0);
    const at::Tensor zeros = all_reduce(is_zero.to(grad.scalar_type()), ReduceOp::kSum);
    const at::Tensor nonzero_product =
        all_reduce(at::where(is_zero, at::ones_like(input), input), ReduceOp::kProduct);
    const at::Tensor others =
        at::where(is_zero, at::where(zeros.eq(1), nonzero_product, at::zeros_like(input)),
                  at::where(zeros.eq(0), nonzero_product / input, at::zeros_like(input)));
    return {total * others, at::Tensor(), at::Tensor()};
  }
};

at::Tensor all_reduce(const at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                      at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::all_reduce(self, reduce_op, tag, ranks, group_size);
  }
  return AllReduceFunction::apply(self, parse_reduce_op("all_reduce", reduce_op),
                                  GroupArgs(tag, ranks, group_size));
}

void all_reduce_(at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                 at::IntArrayRef ranks, int64_t group_size) {
  if (records_grad(self)) {
    // Functional op + copy_: autograd sees an ordinary in-place copy. The result is waited here
    // because copy_ reads it; the in-place op is therefore synchronous when it records grad.
    self.copy_(handles::wait_tensor(handles::all_reduce(self, reduce_op, tag, ranks, group_size)));
    return;
  }
  {
    at::AutoDispatchBelowADInplaceOrView below;
    handles::all_reduce_(self, reduce_op, tag, ranks, group_size);
  }
  torch::autograd::increment_version(self);
}

std::vector<at::Tensor> all_reduce_coalesced(at::TensorList self, c10::string_view reduce_op,
                                             c10::string_view tag, at::IntArrayRef ranks,
                                             int64_t group_size) {
  if (records_grad(self)) {
    std::vector<at::Tensor> outputs;  // per element, each with its own backward
    for (const auto& tensor : self) {
      outputs.push_back(handles::all_reduce(tensor, reduce_op, tag, ranks, group_size));
    }
    return outputs;
  }
  at::AutoDispatchBelowADInplaceOrView below;
  return handles::all_reduce_coalesced(self, reduce_op, tag, ranks, group_size);
}

class ReduceFunction : public torch::autograd::Function<ReduceFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, ReduceOp reduce_op,
                            int64_t dst, const GroupArgs& group) {
    if (reduce_op != ReduceOp::kSum && reduce_op != ReduceOp::kAvg) {
      not_differentiable("reduce", reduce_op, "sum, avg");
    }
    group.save(ctx);
    ctx->saved_data["avg"] = reduce_op == ReduceOp::kAvg;
    ctx->saved_data["dst"] = dst;
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::reduce(self, reduce_op_name(reduce_op), dst, group.tag, group.ranks,
                           group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    // Only dst's output depends on the inputs: everyone's input gets dst's gradient.
    at::Tensor grad = handles::wait_tensor(handles::broadcast(
        grads[0], ctx->saved_data["dst"].toInt(), group.tag, group.ranks, group.group_size));
    if (ctx->saved_data["avg"].toBool()) {
      grad = grad / group.group_size;
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor reduce(const at::Tensor& self, c10::string_view reduce_op, int64_t dst,
                  c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::reduce(self, reduce_op, dst, tag, ranks, group_size);
  }
  return ReduceFunction::apply(self, parse_reduce_op("reduce", reduce_op), dst,
                               GroupArgs(tag, ranks, group_size));
}

void all_reduce_coalesced_(at::TensorList self, c10::string_view reduce_op, c10::string_view tag,
                           at::IntArrayRef ranks, int64_t group_size) {
  if (records_grad(self)) {
    // As all_reduce_: per tensor, the functional op and an in-place copy autograd can see.
    for (const auto& tensor : self) {
      at::Tensor target = tensor;
      all_reduce_(target, reduce_op, tag, ranks, group_size);
    }
    return;
  }
  {
    at::AutoDispatchBelowADInplaceOrView below;
    handles::all_reduce_coalesced_(self, reduce_op, tag, ranks, group_size);
  }
  for (const auto& tensor : self) {
    torch::autograd::increment_version(tensor);
  }
}

}  // namespace autograd_kernels

}  // namespace c10d_func
