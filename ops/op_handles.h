#pragma once
// Typed dispatcher handles for every c10d_func operator, declared once: code that calls the ops
// from C++ (the backward formulas) goes through the full dispatcher, so a backward run under
// torch.compile records c10d_func ops like any other call.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string_view>

namespace c10d_func::handles {

// The handle of `name` typed as `Signature`; callers keep it in a function-local static.
template <typename Signature>
c10::TypedOperatorHandle<Signature> lookup(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Signature>();
}

using Ranks = at::IntArrayRef;

inline at::Tensor all_reduce(const at::Tensor& self, std::string_view op, std::string_view tag,
                             Ranks ranks, int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, c10::string_view, c10::string_view, Ranks, int64_t)>("c10d_func::all_reduce");
  return handle.call(self, op, tag, ranks, group_size);
}

inline at::Tensor all_gather_into_tensor(const at::Tensor& self, std::string_view tag, Ranks ranks,
                                         int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, c10::string_view, Ranks, int64_t)>("c10d_func::all_gather_into_tensor");
  return handle.call(self, tag, ranks, group_size);
}

inline at::Tensor reduce_scatter_tensor(const at::Tensor& self, std::string_view op,
                                        std::string_view tag, Ranks ranks, int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, c10::string_view, c10::string_view, Ranks, int64_t)>("c10d_func::reduce_scatter_tensor");
  return handle.call(self, op, tag, ranks, group_size);
}

inline at::Tensor all_to_all_single(const at::Tensor& self,
                                    at::OptionalSymIntArrayRef output_split_sizes,
                                    at::OptionalSymIntArrayRef input_split_sizes,
                                    std::string_view tag, Ranks ranks, int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, at::OptionalSymIntArrayRef, at::OptionalSymIntArrayRef, c10::string_view, Ranks, int64_t)>("c10d_func::all_to_all_single");
  return handle.call(self, output_split_sizes, input_split_sizes, tag, ranks, group_size);
}

inline at::Tensor broadcast(const at::Tensor& self, int64_t src, std::string_view tag, Ranks ranks,
                            int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, int64_t, c10::string_view, Ranks, int64_t)>("c10d_func::broadcast");
  return handle.call(self, src, tag, ranks, group_size);
}

inline at::Tensor reduce(const at::Tensor& self, std::string_view op, int64_t dst,
                         std::string_view tag, Ranks ranks, int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, c10::string_view, int64_t, c10::string_view, Ranks, int64_t)>("c10d_func::reduce");
  return handle.call(self, op, dst, tag, ranks, group_size);
}

inline at::Tensor gather(const at::Tensor& self, int64_t dst, std::string_view tag, Ranks ranks,
                         int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, int64_t, c10::string_view, Ranks, int64_t)>("c10d_func::gather");
  return handle.call(self, dst, tag, ranks, group_size);
}

inline at::Tensor scatter(const at::Tensor& self, int64_t src, std::string_view tag, Ranks ranks,
                          int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, int64_t, c10::string_view, Ranks, int64_t)>("c10d_func::scatter");
  return handle.call(self, src, tag, ranks, group_size);
}

inline at::Tensor permute(const at::Tensor& self, at::IntArrayRef src_dst, std::string_view tag,
                          Ranks ranks, int64_t group_size) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&, at::IntArrayRef, c10::string_view, Ranks, int64_t)>("c10d_func::permute");
  return handle.call(self, src_dst, tag, ranks, group_size);
}

inline at::Tensor wait_tensor(const at::Tensor& self) {
  static const auto handle = lookup<at::Tensor(const at::Tensor&)>("c10d_func::wait_tensor");
  return handle.call(self);
}

} // namespace c10d_func::handles
