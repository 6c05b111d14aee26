// Byte reductions; see byte_reduce.h.
#include "transports/byte_reduce.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace c10d_func {

void reduce_into(void* dst, std::vector<const char*> sources, int64_t count, c10::ScalarType dtype,
                 ReduceOp op) {
  if (count == 0) {
    return;
  }
  const auto aliased = std::find(sources.begin(), sources.end(), static_cast<const char*>(dst));
  if (aliased != sources.end()) {
    std::iter_swap(sources.begin(), aliased);
  }
  const auto options = at::TensorOptions().dtype(dtype);
  at::Tensor out = at::from_blob(dst, {count}, options);
  auto view = [&](const char* p) { return at::from_blob(const_cast<char*>(p), {count}, options); };
  auto combine = [&](const at::Tensor& a, const at::Tensor& b) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:  // staged as a sum; the caller divides
        at::add_out(out, a, b);
        return;
      case ReduceOp::kProduct:
        at::mul_out(out, a, b);
        return;
      case ReduceOp::kMin:
        at::minimum_out(out, a, b);
        return;
      case ReduceOp::kMax:
        at::maximum_out(out, a, b);
        return;
      case ReduceOp::kBand:
        at::bitwise_and_out(out, a, b);
        return;
      case ReduceOp::kBor:
        at::bitwise_or_out(out, a, b);
        return;
      case ReduceOp::kBxor:
        at::bitwise_xor_out(out, a, b);
        return;
    }
  };
  if (sources.size() == 1) {
    std::memcpy(dst, sources[0], static_cast<size_t>(count) * c10::elementSize(dtype));
    return;
  }
  const bool half = dtype == c10::kBFloat16 || dtype == c10::kHalf;
  if (half && sources.size() > 2 && (op == ReduceOp::kSum || op == ReduceOp::kAvg)) {
    // Sums of bf16/fp16 accumulate in fp32 and round once: rounding after every member's
    // addition loses what small contributions add up to (256 + 1 + 1 + 1 stays 256 in bf16).
    static thread_local at::Tensor accumulator;
    if (!accumulator.defined() || accumulator.numel() < count) {
      accumulator = at::empty({count}, at::TensorOptions().dtype(at::kFloat));
    }
    at::Tensor sum = accumulator.narrow(0, 0, count);
    sum.copy_(view(sources[0]));
    for (size_t i = 1; i < sources.size(); ++i) {
      sum.add_(view(sources[i]));
    }
    out.copy_(sum);
    return;
  }
  combine(view(sources[0]), view(sources[1]));
  for (size_t i = 2; i < sources.size(); ++i) {
    combine(out, view(sources[i]));
  }
}

}  // namespace c10d_func
