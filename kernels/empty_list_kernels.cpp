// The ops whose only tensors are a list, called with an empty list. The dispatcher picks a kernel
// by the tensors' devices; with none, it runs the op's CompositeExplicitAutograd kernel (or says
// "There were no tensor arguments to this function"). So these ops register one that runs the
// device-generic kernel, which checks the group's plain data and returns an empty result, as a
// coalesced call of nothing should. A non-empty list reaches it only on a device without a
// c10d_func kernel (the CPU and CUDA kernels are registered per key), and is refused by name.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "ops/op_signatures.h"

#include <string_view>

namespace c10d_func {
namespace {

void check_listed_device(std::string_view op, at::TensorList tensors) {
  TORCH_CHECK_NOT_IMPLEMENTED(tensors.empty(), "c10d_func.", op, ": no kernel for tensors on ",
                              tensors.empty() ? "" : tensors.front().device().str(),
                              "; c10d_func runs on CPU and CUDA tensors (move them there first)");
}

std::vector<at::Tensor> any_all_reduce_coalesced(at::TensorList self, c10::string_view reduce_op,
                                                 c10::string_view tag, RankList ranks,
                                                 int64_t group_size) {
  check_listed_device("all_reduce_coalesced", self);
  return all_reduce_coalesced(self, reduce_op, tag, ranks, group_size);
}

void any_all_reduce_coalesced_(at::TensorList self, c10::string_view reduce_op,
                               c10::string_view tag, RankList ranks, int64_t group_size) {
  check_listed_device("all_reduce_coalesced_", self);
  all_reduce_coalesced_(self, reduce_op, tag, ranks, group_size);
}

std::vector<at::Tensor> any_all_gather_into_tensor_coalesced(at::TensorList self,
                                                             c10::string_view tag, RankList ranks,
                                                             int64_t group_size) {
  check_listed_device("all_gather_into_tensor_coalesced", self);
  return all_gather_into_tensor_coalesced(self, tag, ranks, group_size);
}

std::vector<at::Tensor> any_reduce_scatter_tensor_coalesced(at::TensorList self,
                                                            c10::string_view reduce_op,
                                                            c10::string_view tag, RankList ranks,
                                                            int64_t group_size) {
  check_listed_device("reduce_scatter_tensor_coalesced", self);
  return reduce_scatter_tensor_coalesced(self, reduce_op, tag, ranks, group_size);
}

std::vector<at::Tensor> any_batch_p2p_ops(std::vector<std::string> op_list,
                                          at::IntArrayRef peer_list, at::IntArrayRef msg_tag_list,
                                          at::TensorList tensors, c10::string_view tag,
                                          RankList ranks, int64_t group_size) {
  check_listed_device("batch_p2p_ops", tensors);
  return batch_p2p_ops(std::move(op_list), peer_list, msg_tag_list, tensors, tag, ranks,
                       group_size);
}

}  // namespace

TORCH_LIBRARY_IMPL(c10d_func, CompositeExplicitAutograd, m) {
  m.impl("all_reduce_coalesced", &any_all_reduce_coalesced);
  m.impl("all_reduce_coalesced_", &any_all_reduce_coalesced_);
  m.impl("all_gather_into_tensor_coalesced", &any_all_gather_into_tensor_coalesced);
  m.impl("reduce_scatter_tensor_coalesced", &any_reduce_scatter_tensor_coalesced);
  m.impl("batch_p2p_ops", &any_batch_p2p_ops);
}

}  // namespace c10d_func
