// See call_helpers.h.
#include "backend/call_helpers.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <numeric>
#include <sstream>

namespace c10d_func::backend_detail {

ReduceOp to_reduce_op(std::string_view op, const c10d::ReduceOp& reduce_op) {
  switch (reduce_op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PREMUL_SUM:  // scaled before the sum (premultiplied)
      return ReduceOp::kSum;
    case c10d::ReduceOp::AVG:
      return ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::kProduct;
    case c10d::ReduceOp::MIN:
      return ReduceOp::kMin;
    case c10d::ReduceOp::MAX:
      return ReduceOp::kMax;
    case c10d::ReduceOp::BAND:
      return ReduceOp::kBand;
    case c10d::ReduceOp::BOR:
      return ReduceOp::kBor;
    case c10d::ReduceOp::BXOR:
      return ReduceOp::kBxor;
    default:
      TORCH_CHECK(false, kPrefix, op, ": argument 'op' is not a reduction (ReduceOp ",
                  static_cast<int>(reduce_op.op_), ")");
  }
}

// PREMUL_SUM multiplies each member's contribution by its factor before summing.
void premultiply(std::string_view op, const c10d::ReduceOp& reduce_op, const at::Tensor& buffer) {
  if (reduce_op.op_ != c10d::ReduceOp::PREMUL_SUM) {
    return;
  }
  auto* factor = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(reduce_op.supplement_.get());
  TORCH_CHECK(factor, kPrefix, op, ": ReduceOp.PREMUL_SUM without a factor; make it with ",
              "torch.distributed._make_nccl_premul_sum(factor)");
  if (factor->tensor_factor.defined()) {
    buffer.mul_(factor->tensor_factor.to(buffer.device()));
  } else {
    buffer.mul_(factor->double_factor);
  }
}

void check_dense(std::string_view op, const at::Tensor& tensor, std::string_view argument) {
  TORCH_CHECK(tensor.defined(), kPrefix, op, ": argument '", argument, "' is an undefined tensor");
  TORCH_CHECK(tensor.layout() == at::kStrided, kPrefix, op, ": argument '", argument,
              "' must be a dense tensor, got layout ", tensor.layout());
  TORCH_CHECK(tensor.is_cpu() || tensor.is_cuda(), kPrefix, op, ": argument '", argument,
              "' must be a CPU or CUDA tensor, got ", tensor.device());
}

const at::Tensor& single(std::string_view op, const std::vector<at::Tensor>& tensors,
                         std::string_view argument) {
  TORCH_CHECK(tensors.size() == 1, kPrefix, op, ": argument '", argument,
              "' must hold exactly one tensor, got ", tensors.size());
  check_dense(op, tensors[0], argument);
  return tensors[0];
}

// `tensor` must match `like` in dtype, device and element count.
void check_like(std::string_view op, const at::Tensor& tensor, const at::Tensor& like,
                std::string_view argument, int64_t expected_numel) {
  check_dense(op, tensor, argument);
  TORCH_CHECK(tensor.scalar_type() == like.scalar_type(), kPrefix, op, ": argument '", argument,
              "' has dtype ", tensor.scalar_type(), ", expected ", like.scalar_type());
  TORCH_CHECK(tensor.device() == like.device(), kPrefix, op, ": argument '", argument, "' is on ",
              tensor.device(), ", expected ", like.device());
  TORCH_CHECK(tensor.numel() == expected_numel, kPrefix, op, ": argument '", argument, "' has ",
              tensor.numel(), " elements, expected ", expected_numel);
}

// A contiguous 1-D view of `tensor` when it has one, else a fresh buffer (copied from `tensor`
// when `fill`); written back by `settle`.
at::Tensor flat(const at::Tensor& tensor, bool fill) {
  if (tensor.is_contiguous()) {
    return tensor.view({-1});
  }
  return fill ? tensor.contiguous().view({-1})
              : at::empty({tensor.numel()},
                          tensor.options().memory_format(at::MemoryFormat::Contiguous));
}

// Once `done`, copies each staging buffer into the caller's tensor it stands for (a no-op for
// buffers that are views of the tensor itself).
Completion settle(const Completion& done, std::vector<std::pair<at::Tensor, at::Tensor>> copies) {
  std::vector<std::pair<at::Tensor, at::Tensor>> needed;
  for (auto& [target, buffer] : copies) {
    if (!buffer.is_alias_of(target)) {
      needed.emplace_back(std::move(target), std::move(buffer));
    }
  }
  if (needed.empty()) {
    return done;
  }
  const at::Tensor written = needed.front().first;
  return then_run(done, written, [needed = std::move(needed)] {
    for (const auto& [target, buffer] : needed) {
      target.copy_(buffer.view(target.sizes()));
    }
  });
}

// Copies the pieces of a gathered 1-D buffer into `targets`, in order.
Completion scatter_into(const Completion& done, const at::Tensor& gathered,
                        std::vector<at::Tensor> targets) {
  if (targets.empty()) {
    return done;
  }
  const at::Tensor written = targets.front();
  return then_run(done, written, [gathered, targets = std::move(targets)] {
    int64_t offset = 0;
    for (const auto& target : targets) {
      target.copy_(gathered.narrow(0, offset, target.numel()).view(target.sizes()));
      offset += target.numel();
    }
  });
}

at::Tensor concatenated(const std::vector<at::Tensor>& tensors, const at::Tensor& like) {
  if (tensors.empty()) {
    return at::empty({0}, like.options());
  }
  std::vector<at::Tensor> flats;
  flats.reserve(tensors.size());
  for (const auto& tensor : tensors) {
    flats.push_back(tensor.reshape({-1}));
  }
  return at::cat(flats);
}

int64_t total_numel(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& tensor : tensors) {
    total += tensor.numel();
  }
  return total;
}

}  // namespace c10d_func::backend_detail
