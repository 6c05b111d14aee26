#pragma once
// The device-generic kernels of every operator (see collective_kernels.cpp); kernels/cpu and
// kernels/cuda register them for their dispatch keys, and a new device with a transport is one
// more registration file.
#include <ATen/core/Tensor.h>
#include <c10/util/OptionalArrayRef.h>

#include <vector>

namespace c10d_func {

using RankList = at::IntArrayRef;

at::Tensor all_reduce(const at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                      RankList ranks, int64_t group_size);
void all_reduce_(at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                        RankList ranks, int64_t group_size);
std::vector<at::Tensor> all_reduce_coalesced(at::TensorList self, c10::string_view reduce_op,
                                             c10::string_view tag, RankList ranks,
                                             int64_t group_size);
at::Tensor all_gather_into_tensor(const at::Tensor& self, c10::string_view tag, RankList ranks,
                                  int64_t group_size);
std::vector<at::Tensor> all_gather_into_tensor_coalesced(at::TensorList self, c10::string_view tag,
                                                         RankList ranks, int64_t group_size);
at::Tensor reduce_scatter_tensor(const at::Tensor& self, c10::string_view reduce_op,
                                 c10::string_view tag, RankList ranks, int64_t group_size);
std::vector<at::Tensor> reduce_scatter_tensor_coalesced(at::TensorList self,
                                                        c10::string_view reduce_op,
                                                        c10::string_view tag, RankList ranks,
                                                        int64_t group_size);
at::Tensor all_to_all_single(const at::Tensor& self, at::OptionalIntArrayRef output_split_sizes,
                             at::OptionalIntArrayRef input_split_sizes, c10::string_view tag,
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
// CPU: blocks until the collective writing `self` is done. CUDA: the current stream waits on it.
at::Tensor wait_tensor(const at::Tensor& self);

} // namespace c10d_func
