#pragma once
// The C++ signature of every operator, declared once: the device-generic kernels of these names
// (kernels/collective_kernels.cpp, message_kernels.cpp) are registered for CPU and CUDA, and the
// Autograd kernels (autograd/autograd_kernels.h) and dispatcher handles (ops/op_handles.h) take
// their types from these declarations.
#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>

#include <string>
#include <vector>

namespace c10d_func {

using RankList = at::IntArrayRef;

at::Tensor all_reduce(const at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                      RankList ranks, int64_t group_size);
void all_reduce_(at::Tensor& self, c10::string_view reduce_op, c10::string_view tag, RankList ranks,
                 int64_t group_size);
std::vector<at::Tensor> all_reduce_coalesced(at::TensorList self, c10::string_view reduce_op,
                                             c10::string_view tag, RankList ranks,
                                             int64_t group_size);
void all_reduce_coalesced_(at::TensorList self, c10::string_view reduce_op, c10::string_view tag,
                           RankList ranks, int64_t group_size);
at::Tensor all_gather_into_tensor(const at::Tensor& self, c10::string_view tag, RankList ranks,
                                  int64_t group_size);
std::vector<at::Tensor> all_gather_into_tensor_coalesced(at::TensorList self, c10::string_view tag,
                                                         RankList ranks, int64_t group_size);
void all_gather_into_tensor_out(const at::Tensor& self, c10::string_view tag, RankList ranks,
                                int64_t group_size, at::Tensor& out);
at::Tensor reduce_scatter_tensor(const at::Tensor& self, c10::string_view reduce_op,
                                 c10::string_view tag, RankList ranks, int64_t group_size);
std::vector<at::Tensor> reduce_scatter_tensor_coalesced(at::TensorList self,
                                                        c10::string_view reduce_op,
                                                        c10::string_view tag, RankList ranks,
                                                        int64_t group_size);
void reduce_scatter_tensor_out(const at::Tensor& self, c10::string_view reduce_op,
                               c10::string_view tag, RankList ranks, int64_t group_size,
                               at::Tensor& out);
at::Tensor all_to_all_single(const at::Tensor& self, at::OptionalSymIntArrayRef output_split_sizes,
                             at::OptionalSymIntArrayRef input_split_sizes, c10::string_view tag,
                             RankList ranks, int64_t group_size);
at::Tensor broadcast(const at::Tensor& self, int64_t src, c10::string_view tag, RankList ranks,
                     int64_t group_size);
void broadcast_(at::Tensor& self, int64_t src, c10::string_view tag, RankList ranks,
                int64_t group_size);
at::Tensor reduce(const at::Tensor& self, c10::string_view reduce_op, int64_t dst,
                  c10::string_view tag, RankList ranks, int64_t group_size);
at::Tensor gather(const at::Tensor& self, int64_t dst, c10::string_view tag, RankList ranks,
                  int64_t group_size);
at::Tensor scatter(const at::Tensor& self, int64_t src, c10::string_view tag, RankList ranks,
                   int64_t group_size);
at::Tensor permute(const at::Tensor& self, at::IntArrayRef src_dst, c10::string_view tag,
                   RankList ranks, int64_t group_size);
// Messages (kernels/message_kernels.cpp): `dst`/`src`/peers are indices in the group, `msg_tag`
// tells messages between the same two members apart. isend returns an empty tensor that is
// pending until the message has left; irecv a fresh tensor shaped like `self`.
at::Tensor isend(const at::Tensor& self, int64_t dst, int64_t msg_tag, c10::string_view tag,
                 RankList ranks, int64_t group_size);
at::Tensor irecv(const at::Tensor& self, int64_t src, int64_t msg_tag, c10::string_view tag,
                 RankList ranks, int64_t group_size);
std::vector<at::Tensor> batch_p2p_ops(std::vector<std::string> op_list, at::IntArrayRef peer_list,
                                      at::IntArrayRef msg_tag_list, at::TensorList tensors,
                                      c10::string_view tag, RankList ranks, int64_t group_size);
// CPU: blocks until the collective writing `self` is done. CUDA: the current stream waits on it.
at::Tensor wait_tensor(const at::Tensor& self);

}  // namespace c10d_func
