// See local_reduce.h.
#include "transports/local_reduce.h"

#include <ATen/ATen.h>

namespace c10d_func {
namespace {

at::Tensor fold(const at::Tensor& stacked,
                at::Tensor (*combine)(const at::Tensor&, const at::Tensor&)) {
  at::Tensor result = stacked[0].clone();
  for (int64_t i = 1; i < stacked.size(0); ++i) {
    result = combine(result, stacked[i]);
  }
  return result;
}

}  // namespace

void reduce_stack_into(const at::Tensor& output, const at::Tensor& stacked, ReduceOp reduce_op) {
  const auto dtype = stacked.scalar_type();
  const int64_t members = stacked.size(0);
  if (dtype == at::kBool) {
    switch (reduce_op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBor:
        output.copy_(stacked.any(0));
        return;
      case ReduceOp::kProduct:
      case ReduceOp::kMin:
      case ReduceOp::kBand:
        output.copy_(stacked.all(0));
        return;
      case ReduceOp::kBxor:
        output.copy_(fold(stacked, [](const at::Tensor& a, const at::Tensor& b) {
          return at::bitwise_xor(a, b);
        }));
        return;
      case ReduceOp::kAvg:
        break;
    }
    TORCH_INTERNAL_ASSERT(false, "avg on bool is rejected before it reaches a transport");
  }
  switch (reduce_op) {
    case ReduceOp::kSum:
      at::sum_out(const_cast<at::Tensor&>(output), stacked, {0}, false, dtype);
      return;
    case ReduceOp::kAvg:
      at::sum_out(const_cast<at::Tensor&>(output), stacked, {0}, false, dtype);
      if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
        output.div_(members, "trunc");
      } else if (c10::isComplexType(dtype)) {
        // Each part divided on its own, as a staged wire divides (reduction_staging.h), so every
        // transport gives the same bits: a complex division by a real rounds differently.
        at::view_as_real(output).div_(members);
      } else {
        output.div_(members);
      }
      return;
    case ReduceOp::kProduct:
      at::prod_out(const_cast<at::Tensor&>(output), stacked, 0, false, dtype);
      return;
    case ReduceOp::kMin:
      at::amin_out(const_cast<at::Tensor&>(output), stacked, {0});
      return;
    case ReduceOp::kMax:
      at::amax_out(const_cast<at::Tensor&>(output), stacked, {0});
      return;
    case ReduceOp::kBand:
      output.copy_(fold(
          stacked, [](const at::Tensor& a, const at::Tensor& b) { return at::bitwise_and(a, b); }));
      return;
    case ReduceOp::kBor:
      output.copy_(fold(
          stacked, [](const at::Tensor& a, const at::Tensor& b) { return at::bitwise_or(a, b); }));
      return;
    case ReduceOp::kBxor:
      output.copy_(fold(
          stacked, [](const at::Tensor& a, const at::Tensor& b) { return at::bitwise_xor(a, b); }));
      return;
  }
}

}  // namespace c10d_func
