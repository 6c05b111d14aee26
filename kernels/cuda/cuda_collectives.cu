// CUDA kernels of every c10d_func operator.
//
// Until the NCCL transport lands (its own issue), every op checks its group arguments as on CPU
// and then raises a clear error instead of silently falling back to the host. This file is built
// by nvcc and linked against NCCL whenever torch has CUDA, so the CUDA side cannot rot.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <nccl.h>

#include "ops/group_spec.h"

#include <string>
#include <string_view>

namespace c10d_func {
namespace {

[[noreturn]] void not_yet(std::string_view op) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "c10d_func.", op, ": CUDA tensors are not implemented yet (the NCCL transport, built ",
      "against NCCL ", NCCL_MAJOR, ".", NCCL_MINOR, ", is not wired in); move the tensor to the ",
      "CPU to use the Gloo transport");
}

// Group errors first, exactly as on CPU; then the not-implemented error.
[[noreturn]] at::Tensor one(std::string_view op, c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse(op, tag, ranks, group_size);
  not_yet(op);
}

at::Tensor all_reduce(const at::Tensor&, c10::string_view, c10::string_view tag,
                      at::IntArrayRef ranks, int64_t group_size) {
  return one("all_reduce", tag, ranks, group_size);
}
at::Tensor& all_reduce_(at::Tensor&, c10::string_view, c10::string_view tag, at::IntArrayRef ranks,
                        int64_t group_size) {
  one("all_reduce_", tag, ranks, group_size);
}
std::vector<at::Tensor> all_reduce_coalesced(at::TensorList, c10::string_view, c10::string_view tag,
                                             at::IntArrayRef ranks, int64_t group_size) {
  one("all_reduce_coalesced", tag, ranks, group_size);
}
at::Tensor all_gather_into_tensor(const at::Tensor&, c10::string_view tag, at::IntArrayRef ranks,
                                  int64_t group_size) {
  return one("all_gather_into_tensor", tag, ranks, group_size);
}
std::vector<at::Tensor> all_gather_into_tensor_coalesced(at::TensorList, c10::string_view tag,
                                                         at::IntArrayRef ranks,
                                                         int64_t group_size) {
  one("all_gather_into_tensor_coalesced", tag, ranks, group_size);
}
at::Tensor reduce_scatter_tensor(const at::Tensor&, c10::string_view, c10::string_view tag,
                                 at::IntArrayRef ranks, int64_t group_size) {
  return one("reduce_scatter_tensor", tag, ranks, group_size);
}
std::vector<at::Tensor> reduce_scatter_tensor_coalesced(at::TensorList, c10::string_view,
                                                        c10::string_view tag,
                                                        at::IntArrayRef ranks,
                                                        int64_t group_size) {
  one("reduce_scatter_tensor_coalesced", tag, ranks, group_size);
}
at::Tensor all_to_all_single(const at::Tensor&, at::OptionalIntArrayRef, at::OptionalIntArrayRef,
                             c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  return one("all_to_all_single", tag, ranks, group_size);
}
at::Tensor broadcast(const at::Tensor&, int64_t, c10::string_view tag, at::IntArrayRef ranks,
                     int64_t group_size) {
  return one("broadcast", tag, ranks, group_size);
}
at::Tensor& broadcast_(at::Tensor&, int64_t, c10::string_view tag, at::IntArrayRef ranks,
                       int64_t group_size) {
  one("broadcast_", tag, ranks, group_size);
}
at::Tensor reduce(const at::Tensor&, c10::string_view, int64_t, c10::string_view tag,
                  at::IntArrayRef ranks, int64_t group_size) {
  return one("reduce", tag, ranks, group_size);
}
at::Tensor gather(const at::Tensor&, int64_t, c10::string_view tag, at::IntArrayRef ranks,
                  int64_t group_size) {
  return one("gather", tag, ranks, group_size);
}
at::Tensor scatter(const at::Tensor&, int64_t, c10::string_view tag, at::IntArrayRef ranks,
                   int64_t group_size) {
  return one("scatter", tag, ranks, group_size);
}
at::Tensor permute(const at::Tensor&, at::IntArrayRef, c10::string_view tag, at::IntArrayRef ranks,
                   int64_t group_size) {
  return one("permute", tag, ranks, group_size);
}
// Nothing can be pending on CUDA yet, so waiting is the identity.
at::Tensor wait_tensor(const at::Tensor& self) {
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(c10d_func, CUDA, m) {
  m.impl("all_reduce", &all_reduce);
  m.impl("all_reduce_", &all_reduce_);
  m.impl("all_reduce_coalesced", &all_reduce_coalesced);
  m.impl("all_gather_into_tensor", &all_gather_into_tensor);
  m.impl("all_gather_into_tensor_coalesced", &all_gather_into_tensor_coalesced);
  m.impl("reduce_scatter_tensor", &reduce_scatter_tensor);
  m.impl("reduce_scatter_tensor_coalesced", &reduce_scatter_tensor_coalesced);
  m.impl("all_to_all_single", &all_to_all_single);
  m.impl("broadcast", &broadcast);
  m.impl("broadcast_", &broadcast_);
  m.impl("reduce", &reduce);
  m.impl("gather", &gather);
  m.impl("scatter", &scatter);
  m.impl("permute", &permute);
  m.impl("wait_tensor", &wait_tensor);
}

} // namespace c10d_func
