// Backward formulas of the ops that move data between members.
//
// all_to_all_single -> all_to_all_single of the gradient with the split sizes swapped
// broadcast(src)    -> reduce(sum, dst=src): src's input gets everyone's gradient, others zero
// broadcast_        -> the functional broadcast + copy_ (PyTorch's in-place rules apply)
// permute(src_dst)  -> permute of the gradient with the inverse permutation
// wait_tensor       -> identity (it returns its input unchanged)
#include <ATen/ATen.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>

#include "autograd/autograd_kernels.h"
#include "autograd/autograd_support.h"
#include "ops/op_handles.h"

namespace c10d_func {
namespace autograd_kernels {

c10::IValue optional_splits(at::OptionalSymIntArrayRef splits) {
  return splits.has_value() ? c10::IValue(splits->vec()) : c10::IValue();
}

std::optional<std::vector<c10::SymInt>> load_splits(const c10::IValue& value) {
  if (value.isNone()) {
    return std::nullopt;
  }
  return value.toSymIntList().vec();
}

class AllToAllFunction : public torch::autograd::Function<AllToAllFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self,
                            at::OptionalSymIntArrayRef output_split_sizes,
                            at::OptionalSymIntArrayRef input_split_sizes, const GroupArgs& group) {
    group.save(ctx);
    ctx->saved_data["output_split_sizes"] = optional_splits(output_split_sizes);
    ctx->saved_data["input_split_sizes"] = optional_splits(input_split_sizes);
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::all_to_all_single(self, output_split_sizes, input_split_sizes, group.tag,
                                      group.ranks, group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    // What this member received from j goes back to j, so the two split lists trade places.
    const auto received = load_splits(ctx->saved_data["output_split_sizes"]);
    const auto sent = load_splits(ctx->saved_data["input_split_sizes"]);
    at::OptionalSymIntArrayRef new_output = sent ? at::OptionalSymIntArrayRef(*sent) : c10::nullopt;
    at::OptionalSymIntArrayRef new_input =
        received ? at::OptionalSymIntArrayRef(*received) : c10::nullopt;
    at::Tensor grad = handles::wait_tensor(handles::all_to_all_single(
        grads[0].contiguous(), new_output, new_input, group.tag, group.ranks, group.group_size));
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class BroadcastFunction : public torch::autograd::Function<BroadcastFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, int64_t src,
                            const GroupArgs& group) {
    group.save(ctx);
    ctx->saved_data["src"] = src;
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::broadcast(self, src, group.tag, group.ranks, group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    at::Tensor grad = handles::wait_tensor(handles::reduce(
        grads[0], "sum", ctx->saved_data["src"].toInt(), group.tag, group.ranks, group.group_size));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

class PermuteFunction : public torch::autograd::Function<PermuteFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self,
                            std::vector<int64_t> src_dst, const GroupArgs& group) {
    group.save(ctx);
    std::vector<int64_t> inverse(src_dst.size());
    for (size_t i = 0; i < src_dst.size(); ++i) {
      TORCH_CHECK(src_dst[i] >= 0 && src_dst[i] < static_cast<int64_t>(src_dst.size()),
                  "c10d_func.permute: argument 'src_dst' entry ", i, " is out of range");
      inverse[src_dst[i]] = static_cast<int64_t>(i);
    }
    ctx->saved_data["inverse"] = inverse;
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::permute(self, src_dst, group.tag, group.ranks, group.group_size);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = GroupArgs::load(ctx);
    at::Tensor grad =
        handles::wait_tensor(handles::permute(grads[0], ctx->saved_data["inverse"].toIntVector(),
                                              group.tag, group.ranks, group.group_size));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

at::Tensor all_to_all_single(const at::Tensor& self, at::OptionalSymIntArrayRef output_split_sizes,
                             at::OptionalSymIntArrayRef input_split_sizes, c10::string_view tag,
                             at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::all_to_all_single(self, output_split_sizes, input_split_sizes, tag, ranks,
                                      group_size);
  }
  return AllToAllFunction::apply(self, output_split_sizes, input_split_sizes,
                                 GroupArgs(tag, ranks, group_size));
}

at::Tensor broadcast(const at::Tensor& self, int64_t src, c10::string_view tag,
                     at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::broadcast(self, src, tag, ranks, group_size);
  }
  return BroadcastFunction::apply(self, src, GroupArgs(tag, ranks, group_size));
}

void broadcast_(at::Tensor& self, int64_t src, c10::string_view tag, at::IntArrayRef ranks,
                int64_t group_size) {
  if (records_grad(self)) {
    self.copy_(handles::wait_tensor(handles::broadcast(self, src, tag, ranks, group_size)));
    return;
  }
  {
    at::AutoDispatchBelowADInplaceOrView below;
    handles::broadcast_(self, src, tag, ranks, group_size);
  }
  torch::autograd::increment_version(self);
}

at::Tensor permute(const at::Tensor& self, at::IntArrayRef src_dst, c10::string_view tag,
                   at::IntArrayRef ranks, int64_t group_size) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::permute(self, src_dst, tag, ranks, group_size);
  }
  return PermuteFunction::apply(self, src_dst.vec(), GroupArgs(tag, ranks, group_size));
}

// Identity for autograd. An explicit Function rather than returning the input as is: under
// functionalization (torch.compile) the op's output is a new tensor, which must still carry the
// input's history.
class WaitFunction : public torch::autograd::Function<WaitFunction> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor& self) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::wait_tensor(self);
  }

  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0]}; }
};

at::Tensor wait_tensor(const at::Tensor& self) {
  if (!records_grad(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return handles::wait_tensor(self);
  }
  return WaitFunction::apply(self);
}

}  // namespace autograd_kernels

}  // namespace c10d_func
