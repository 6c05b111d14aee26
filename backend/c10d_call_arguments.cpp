// See c10d_call_arguments.h.
#include "backend/c10d_call_arguments.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cctype>
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

void check_reduction(std::string_view op, ReduceOp reduce_op, c10::ScalarType dtype) {
  if (is_bitwise(reduce_op) && !c10::isIntegralType(dtype, /*includeBool=*/true)) {
    std::string name = reduce_op_name(reduce_op);
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);  // torch's ReduceOp.BAND
    TORCH_CHECK(false, kPrefix, op, ": Cannot use ReduceOp.", name,
                " with non-integral dtype (got ", dtype,
                "; bitwise reductions take integer and bool tensors)");
  }
  check_reduce_dtype(op, reduce_op, dtype);
}

void check_dense(std::string_view op, const at::Tensor& tensor, std::string_view argument) {
  TORCH_CHECK(tensor.defined(), kPrefix, op, ": argument '", argument, "' is an undefined tensor");
  TORCH_CHECK(tensor.layout() == at::kStrided, kPrefix, op,
              ": only supports dense tensors (argument '", argument, "' has layout ",
              tensor.layout(), "; all_reduce alone takes sparse COO tensors, as on Gloo)");
  TORCH_CHECK(tensor.is_cpu() || tensor.is_cuda(), kPrefix, op, ": unsupported device type ",
              tensor.device().type(), " (argument '", argument,
              "'; c10d_func serves CPU and CUDA)");
}

const at::Tensor& single(std::string_view op, const std::vector<at::Tensor>& tensors,
                         std::string_view argument, std::string_view phrase) {
  TORCH_CHECK(tensors.size() == 1, kPrefix, op, ": ", phrase, " (argument '", argument, "' holds ",
              tensors.size(), " tensors; c10d_func, as NCCL, takes one tensor per ",
              "call: issue one call per tensor, or the coalesced form)");
  check_dense(op, tensors[0], argument);
  return tensors[0];
}

void check_root_rank(std::string_view op, int64_t root, int64_t size) {
  TORCH_CHECK(root >= 0 && root < size, kPrefix, op, ": invalid root rank: ", root,
              " (the group has ranks 0..", size - 1, ")");
}

void check_root_tensor(std::string_view op, int64_t root_tensor, size_t tensors) {
  TORCH_CHECK(root_tensor >= 0 && root_tensor < static_cast<int64_t>(tensors), kPrefix, op,
              ": invalid root tensor: ", root_tensor, " (the call passes ", tensors,
              " tensor; rootTensor indexes it)");
}

void check_like(std::string_view op, const at::Tensor& tensor, const at::Tensor& like,
                std::string_view argument, int64_t expected_numel, size_t index) {
  check_dense(op, tensor, argument);
  TORCH_CHECK(tensor.scalar_type() == like.scalar_type() && tensor.device() == like.device(),
              kPrefix, op, ": invalid tensor type at index ", index, " (expected dtype ",
              like.scalar_type(), " on ", like.device(), ", got dtype ", tensor.scalar_type(),
              " on ", tensor.device(), "; argument '", argument, "')");
  TORCH_CHECK(tensor.numel() == expected_numel, kPrefix, op, ": invalid tensor size at index ",
              index, " (expected ", expected_numel, " elements, got ", tensor.numel(),
              "; argument '", argument, "')");
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
  std::vector<at::Tensor> used;
  for (const auto& [target, buffer] : needed) {
    used.push_back(target);
    used.push_back(buffer);
  }
  return then_run(done, written, used, [needed = std::move(needed)] {
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
  std::vector<at::Tensor> used = targets;
  used.push_back(gathered);
  return then_run(done, written, used, [gathered, targets = std::move(targets)] {
    int64_t offset = 0;
    for (const auto& target : targets) {
      target.copy_(gathered.narrow(0, offset, target.numel()).view(target.sizes()));
      offset += target.numel();
    }
  });
}

std::vector<at::Tensor> root_list(std::string_view op,
                                  const std::vector<std::vector<at::Tensor>>& lists,
                                  const at::Tensor& like, std::string_view side, bool is_root,
                                  int64_t members) {
  if (!is_root) {
    TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), kPrefix, op,
                ": requires empty ", side, " on non-root (only the root passes ", side,
                " tensors)");
    return {};
  }
  // Gloo's words, capitalised as it writes them ("Incorrect output list size").
  const std::string capitalised =
      std::string(1, static_cast<char>(std::toupper(side[0]))) + std::string(side.substr(1));
  TORCH_CHECK(lists.size() == 1, kPrefix, op, ": requires a single-element ", side,
              " list containing a list with ", members, " tensors (got ", lists.size(), " lists)");
  TORCH_CHECK(static_cast<int64_t>(lists[0].size()) == members, kPrefix, op, ": Incorrect ", side,
              " list size ", lists[0].size(), ". ", capitalised, " list size should be ", members,
              ", same as size of the process group.");
  const std::string argument = std::string(side) + "_tensors";
  for (size_t i = 0; i < lists[0].size(); ++i) {
    check_like(op, lists[0][i], like, argument, like.numel(), i);
  }
  return lists[0];
}

std::vector<int64_t> row_splits(std::string_view op, std::vector<int64_t> sizes,
                                const at::Tensor& tensor, std::string_view argument,
                                int64_t members) {
  const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  if (sizes.empty()) {
    TORCH_CHECK(rows % members == 0, kPrefix, op,
                ": Tensor's dim 0 does not divide equally across group size (argument '", argument,
                "' has ", rows, " rows for ", members, " ranks; pass split sizes)");
    return std::vector<int64_t>(members, rows / members);
  }
  TORCH_CHECK(static_cast<int64_t>(sizes.size()) == members, kPrefix, op,
              ": Number of tensor splits not equal to group size (argument '", argument,
              "_split_sizes' holds ", sizes.size(), " for ", members, " ranks)");
  for (int64_t size : sizes) {
    TORCH_CHECK(size >= 0, kPrefix, op, ": Split sizes must be non-negative (argument '", argument,
                "_split_sizes' holds ", size, ")");
  }
  const int64_t sum = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  TORCH_CHECK(sum == rows, kPrefix, op, ": Split sizes doesn't match total dim 0 size (argument '",
              argument, "_split_sizes' sums to ", sum, ", '", argument, "' has ", rows, " rows)");
  return sizes;
}

at::Tensor concatenated(Communicator& comm, const std::vector<at::Tensor>& tensors,
                        const at::Tensor& like) {
  at::Tensor packed = staging_buffer(comm, total_numel(tensors), like);
  int64_t at = 0;
  for (const auto& tensor : tensors) {
    packed.narrow(0, at, tensor.numel()).view(tensor.sizes()).copy_(tensor);
    at += tensor.numel();
  }
  return packed;
}

std::optional<at::Tensor> end_to_end_view(const std::vector<at::Tensor>& tensors) {
  bool adjacent = !tensors.empty();
  for (size_t i = 0; adjacent && i < tensors.size(); ++i) {
    const at::Tensor& tensor = tensors[i];
    adjacent = tensor.is_contiguous() && tensor.scalar_type() == tensors[0].scalar_type() &&
               tensor.device() == tensors[0].device() &&
               tensor.storage().is_alias_of(tensors[0].storage()) &&
               (i == 0 || static_cast<const char*>(tensor.const_data_ptr()) ==
                              static_cast<const char*>(tensors[i - 1].const_data_ptr()) +
                                  tensors[i - 1].nbytes());
  }
  if (!adjacent) {
    return std::nullopt;
  }
  return tensors[0].as_strided({total_numel(tensors)}, {1}, tensors[0].storage_offset());
}

at::Tensor read_end_to_end(Communicator& comm, const std::vector<at::Tensor>& tensors,
                           const at::Tensor& like) {
  std::optional<at::Tensor> view = end_to_end_view(tensors);
  return view ? *view : concatenated(comm, tensors, like);
}

at::Tensor write_end_to_end(Communicator& comm, std::vector<at::Tensor>& targets, int64_t numel,
                            const at::Tensor& like) {
  std::optional<at::Tensor> view = end_to_end_view(targets);
  if (view && view->numel() == numel) {
    targets.clear();
    return *view;
  }
  return staging_buffer(comm, numel, like);
}

at::Tensor staging_buffer(Communicator& comm, int64_t numel, const at::Tensor& like) {
  return comm.new_output({numel}, like.options());
}

int64_t total_numel(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& tensor : tensors) {
    total += tensor.numel();
  }
  return total;
}

}  // namespace c10d_func::backend_detail
