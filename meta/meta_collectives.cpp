// Meta kernels: the output of every op with its exact shape, dtype and (contiguous) strides, and
// no data or communication. They check every argument that needs no world (group structure,
// reduce_op and dtype, src/dst, permutations, split sizes), so a traced program fails at trace
// time where the real kernel would, and they never ask for the caller's rank, so FakeTensor
// tracing works before any process group exists. SymInt throughout.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/op_list.h"
#include "ops/shape_rules.h"
#include "ops/tensor_checks.h"
#include "runtime/group_spec.h"
#include "transports/reduce_op.h"

#include <string_view>

namespace c10d_func {
namespace {

at::Tensor new_output(const SymShape& shape, const at::Tensor& like) {
  return at::empty_symint(shape, like.options().memory_format(at::MemoryFormat::Contiguous));
}

at::Tensor same_shape_output(const at::Tensor& self) {
  return new_output(SymShape(self.sym_sizes().begin(), self.sym_sizes().end()), self);
}

void check_reduction(std::string_view op, std::string_view name, at::TensorList tensors) {
  const ReduceOp reduce_op = parse_reduce_op(op, name);
  for (const auto& tensor : tensors) {
    check_reduce_dtype(op, reduce_op, tensor.scalar_type());
  }
}

at::Tensor all_reduce(const at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                      at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("all_reduce", tag, ranks, group_size);
  check_reduction("all_reduce", reduce_op, self);
  return same_shape_output(self);
}

void all_reduce_(at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                 at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("all_reduce_", tag, ranks, group_size);
  check_reduction("all_reduce_", reduce_op, self);
}

std::vector<at::Tensor> all_reduce_coalesced(at::TensorList self, c10::string_view reduce_op,
                                             c10::string_view tag, at::IntArrayRef ranks,
                                             int64_t group_size) {
  GroupSpec::parse("all_reduce_coalesced", tag, ranks, group_size);
  check_reduction("all_reduce_coalesced", reduce_op, self);
  check_same_device("all_reduce_coalesced", self);
  std::vector<at::Tensor> outputs;
  for (const auto& tensor : self) {
    outputs.push_back(same_shape_output(tensor));
  }
  return outputs;
}

void all_reduce_coalesced_(at::TensorList self, c10::string_view reduce_op, c10::string_view tag,
                           at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("all_reduce_coalesced_", tag, ranks, group_size);
  check_reduction("all_reduce_coalesced_", reduce_op, self);
  check_same_device("all_reduce_coalesced_", self);
}

at::Tensor all_gather_into_tensor(const at::Tensor& self, c10::string_view tag,
                                  at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_gather_into_tensor";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  return new_output(gathered_shape(kOp, self.sym_sizes(), group_size), self);
}

void all_gather_into_tensor_out(const at::Tensor& self, c10::string_view tag, at::IntArrayRef ranks,
                                int64_t group_size, at::Tensor& out) {
  constexpr std::string_view kOp = "all_gather_into_tensor_out";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  check_out(kOp, self, out, gathered_shape(kOp, self.sym_sizes(), group_size));
}

std::vector<at::Tensor> all_gather_into_tensor_coalesced(at::TensorList self, c10::string_view tag,
                                                         at::IntArrayRef ranks,
                                                         int64_t group_size) {
  constexpr std::string_view kOp = "all_gather_into_tensor_coalesced";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  check_same_device(kOp, self);
  std::vector<at::Tensor> outputs;
  for (const auto& tensor : self) {
    outputs.push_back(new_output(gathered_shape(kOp, tensor.sym_sizes(), group_size), tensor));
  }
  return outputs;
}

at::Tensor reduce_scatter_tensor(const at::Tensor& self, c10::string_view reduce_op,
                                 c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "reduce_scatter_tensor";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  check_reduction(kOp, reduce_op, self);
  return new_output(scattered_shape(kOp, self.sym_sizes(), group_size), self);
}

void reduce_scatter_tensor_out(const at::Tensor& self, c10::string_view reduce_op,
                               c10::string_view tag, at::IntArrayRef ranks, int64_t group_size,
                               at::Tensor& out) {
  constexpr std::string_view kOp = "reduce_scatter_tensor_out";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  check_reduction(kOp, reduce_op, self);
  check_out(kOp, self, out, scattered_shape(kOp, self.sym_sizes(), group_size));
}

std::vector<at::Tensor> reduce_scatter_tensor_coalesced(at::TensorList self,
                                                        c10::string_view reduce_op,
                                                        c10::string_view tag, at::IntArrayRef ranks,
                                                        int64_t group_size) {
  constexpr std::string_view kOp = "reduce_scatter_tensor_coalesced";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  check_reduction(kOp, reduce_op, self);
  check_same_device(kOp, self);
  std::vector<at::Tensor> outputs;
  for (const auto& tensor : self) {
    outputs.push_back(new_output(scattered_shape(kOp, tensor.sym_sizes(), group_size), tensor));
  }
  return outputs;
}

at::Tensor all_to_all_single(const at::Tensor& self, at::OptionalSymIntArrayRef output_split_sizes,
                             at::OptionalSymIntArrayRef input_split_sizes, c10::string_view tag,
                             at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_to_all_single";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  return new_output(
      all_to_all_shape(kOp, self.sym_sizes(), output_split_sizes, input_split_sizes, group_size),
      self);
}

at::Tensor broadcast(const at::Tensor& self, int64_t src, c10::string_view tag,
                     at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("broadcast", tag, ranks, group_size);
  check_group_index("broadcast", "src", src, group_size);
  return same_shape_output(self);
}

void broadcast_(at::Tensor& self, int64_t src, c10::string_view tag, at::IntArrayRef ranks,
                int64_t group_size) {
  GroupSpec::parse("broadcast_", tag, ranks, group_size);
  check_group_index("broadcast_", "src", src, group_size);
}

at::Tensor reduce(const at::Tensor& self, c10::string_view reduce_op, int64_t dst,
                  c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("reduce", tag, ranks, group_size);
  check_reduction("reduce", reduce_op, self);
  check_group_index("reduce", "dst", dst, group_size);
  return same_shape_output(self);
}

at::Tensor gather(const at::Tensor& self, int64_t dst, c10::string_view tag, at::IntArrayRef ranks,
                  int64_t group_size) {
  GroupSpec::parse("gather", tag, ranks, group_size);
  check_group_index("gather", "dst", dst, group_size);
  return new_output(gathered_shape("gather", self.sym_sizes(), group_size), self);
}

at::Tensor scatter(const at::Tensor& self, int64_t src, c10::string_view tag, at::IntArrayRef ranks,
                   int64_t group_size) {
  GroupSpec::parse("scatter", tag, ranks, group_size);
  check_group_index("scatter", "src", src, group_size);
  return new_output(scattered_shape("scatter", self.sym_sizes(), group_size), self);
}

at::Tensor permute(const at::Tensor& self, at::IntArrayRef src_dst, c10::string_view tag,
                   at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("permute", tag, ranks, group_size);
  check_permutation("permute", src_dst, group_size);
  return same_shape_output(self);
}

at::Tensor isend(const at::Tensor& self, int64_t dst, int64_t msg_tag, c10::string_view tag,
                 at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("isend", tag, ranks, group_size);
  check_group_index("isend", "dst", dst, group_size);
  return at::empty({0}, self.options());
}

at::Tensor irecv(const at::Tensor& self, int64_t src, int64_t msg_tag, c10::string_view tag,
                 at::IntArrayRef ranks, int64_t group_size) {
  GroupSpec::parse("irecv", tag, ranks, group_size);
  check_group_index("irecv", "src", src, group_size);
  return same_shape_output(self);
}

std::vector<at::Tensor> batch_p2p_ops(std::vector<std::string> op_list, at::IntArrayRef peer_list,
                                      at::IntArrayRef msg_tag_list, at::TensorList tensors,
                                      c10::string_view tag, at::IntArrayRef ranks,
                                      int64_t group_size) {
  constexpr std::string_view kOp = "batch_p2p_ops";
  GroupSpec::parse(kOp, tag, ranks, group_size);
  check_message_lists(kOp, op_list, peer_list.size(), msg_tag_list.size(), tensors.size());
  check_same_device(kOp, tensors);
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_group_index(kOp, "peer_list", peer_list[i], group_size);
    outputs.push_back(op_list[i] == "isend" ? at::empty({0}, tensors[i].options())
                                            : same_shape_output(tensors[i]));
  }
  return outputs;
}

// The input itself, as the CPU and CUDA kernels return it (the collective's own buffer), so that
// FakeTensor agrees with the real kernels (opcheck's test_faketensor compares their aliasing).
at::Tensor wait_tensor(const at::Tensor& self) {
  return self;
}

TORCH_LIBRARY_IMPL(c10d_func, Meta, m) {
  C10D_FUNC_IMPL_EVERY_OP(m)
}

}  // namespace

}  // namespace c10d_func
