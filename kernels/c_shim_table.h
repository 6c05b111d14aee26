#pragma once
// The C entry points of every op (see kernels/c_shims.h), one row each:
//   X(op, (parameters), (arguments), body...)
// parameters as inductor's C++ wrapper passes them for the op's schema (ops/op_list.h), the same
// names as arguments, then the body that calls the op. Expanded in two places:
// kernels/c_shims.cpp (in libc10d_func) defines each body as an entry of the table below;
// kernels/c_shim_exports.cpp (in libc10d_func_c_shims, which depends on nothing) defines the
// exported `aoti_torch_<device>_c10d_func_<op>` functions, which call the table. The bodies use
// helpers of kernels/c_shims.cpp and are expanded only there.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <cstddef>

#define C10D_FUNC_C_SHIM_TABLE(X)                                                                  \
  X(all_reduce,                                                                                    \
    (AtenTensorHandle self, const char* reduce_op, const char* tag, const int64_t* ranks,          \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, reduce_op, tag, ranks, ranks_len_, group_size, ret0),                                   \
    *ret0 = new_handle(                                                                            \
        handles::all_reduce(tensor(self), reduce_op, tag, ints(ranks, ranks_len_), group_size));)  \
  X(all_reduce_,                                                                                   \
    (AtenTensorHandle self, const char* reduce_op, const char* tag, const int64_t* ranks,          \
     int64_t ranks_len_, int64_t group_size),                                                      \
    (self, reduce_op, tag, ranks, ranks_len_, group_size),                                         \
    handles::all_reduce_(tensor(self), reduce_op, tag, ints(ranks, ranks_len_), group_size);)      \
  X(all_reduce_coalesced,                                                                          \
    (const AtenTensorHandle* self, int64_t self_len_, const char* reduce_op, const char* tag,      \
     const int64_t* ranks, int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret,          \
     int64_t ret_len_),                                                                            \
    (self, self_len_, reduce_op, tag, ranks, ranks_len_, group_size, ret, ret_len_),               \
    return_list("all_reduce_coalesced",                                                            \
                handles::all_reduce_coalesced(tensors(self, self_len_), reduce_op, tag,            \
                                              ints(ranks, ranks_len_), group_size),                \
                ret, ret_len_);)                                                                   \
  X(all_reduce_coalesced_,                                                                         \
    (const AtenTensorHandle* self, int64_t self_len_, const char* reduce_op, const char* tag,      \
     const int64_t* ranks, int64_t ranks_len_, int64_t group_size),                                \
    (self, self_len_, reduce_op, tag, ranks, ranks_len_, group_size),                              \
    handles::all_reduce_coalesced_(tensors(self, self_len_), reduce_op, tag,                       \
                                   ints(ranks, ranks_len_), group_size);)                          \
  X(all_gather_into_tensor,                                                                        \
    (AtenTensorHandle self, const char* tag, const int64_t* ranks, int64_t ranks_len_,             \
     int64_t group_size, AtenTensorHandle* ret0),                                                  \
    (self, tag, ranks, ranks_len_, group_size, ret0),                                              \
    *ret0 = new_handle(                                                                            \
        handles::all_gather_into_tensor(tensor(self), tag, ints(ranks, ranks_len_), group_size));) \
  X(all_gather_into_tensor_out,                                                                    \
    (AtenTensorHandle self, const char* tag, const int64_t* ranks, int64_t ranks_len_,             \
     int64_t group_size, AtenTensorHandle out),                                                    \
    (self, tag, ranks, ranks_len_, group_size, out),                                               \
    handles::all_gather_into_tensor_out(tensor(self), tag, ints(ranks, ranks_len_), group_size,    \
                                        tensor(out));)                                             \
  X(all_gather_into_tensor_coalesced,                                                              \
    (const AtenTensorHandle* self, int64_t self_len_, const char* tag, const int64_t* ranks,       \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret, int64_t ret_len_),             \
    (self, self_len_, tag, ranks, ranks_len_, group_size, ret, ret_len_),                          \
    return_list("all_gather_into_tensor_coalesced",                                                \
                handles::all_gather_into_tensor_coalesced(tensors(self, self_len_), tag,           \
                                                          ints(ranks, ranks_len_), group_size),    \
                ret, ret_len_);)                                                                   \
  X(reduce_scatter_tensor,                                                                         \
    (AtenTensorHandle self, const char* reduce_op, const char* tag, const int64_t* ranks,          \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, reduce_op, tag, ranks, ranks_len_, group_size, ret0),                                   \
    *ret0 = new_handle(handles::reduce_scatter_tensor(tensor(self), reduce_op, tag,                \
                                                      ints(ranks, ranks_len_), group_size));)      \
  X(reduce_scatter_tensor_out,                                                                     \
    (AtenTensorHandle self, const char* reduce_op, const char* tag, const int64_t* ranks,          \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle out),                                \
    (self, reduce_op, tag, ranks, ranks_len_, group_size, out),                                    \
    handles::reduce_scatter_tensor_out(tensor(self), reduce_op, tag, ints(ranks, ranks_len_),      \
                                       group_size, tensor(out));)                                  \
  X(reduce_scatter_tensor_coalesced,                                                               \
    (const AtenTensorHandle* self, int64_t self_len_, const char* reduce_op, const char* tag,      \
     const int64_t* ranks, int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret,          \
     int64_t ret_len_),                                                                            \
    (self, self_len_, reduce_op, tag, ranks, ranks_len_, group_size, ret, ret_len_),               \
    return_list("reduce_scatter_tensor_coalesced",                                                 \
                handles::reduce_scatter_tensor_coalesced(tensors(self, self_len_), reduce_op, tag, \
                                                         ints(ranks, ranks_len_), group_size),     \
                ret, ret_len_);)                                                                   \
  X(all_to_all_single,                                                                             \
    (AtenTensorHandle self, const int64_t** output_split_sizes, int64_t output_split_sizes_len_,   \
     const int64_t** input_split_sizes, int64_t input_split_sizes_len_, const char* tag,           \
     const int64_t* ranks, int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),        \
    (self, output_split_sizes, output_split_sizes_len_, input_split_sizes, input_split_sizes_len_, \
     tag, ranks, ranks_len_, group_size, ret0),                                                    \
    auto output_splits = optional_sizes(output_split_sizes, output_split_sizes_len_);              \
    auto input_splits = optional_sizes(input_split_sizes, input_split_sizes_len_);                 \
    *ret0 = new_handle(handles::all_to_all_single(tensor(self), view(output_splits),               \
                                                  view(input_splits), tag,                         \
                                                  ints(ranks, ranks_len_), group_size));)          \
  X(broadcast,                                                                                     \
    (AtenTensorHandle self, int64_t src, const char* tag, const int64_t* ranks,                    \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, src, tag, ranks, ranks_len_, group_size, ret0),                                         \
    *ret0 = new_handle(                                                                            \
        handles::broadcast(tensor(self), src, tag, ints(ranks, ranks_len_), group_size));)         \
  X(broadcast_,                                                                                    \
    (AtenTensorHandle self, int64_t src, const char* tag, const int64_t* ranks,                    \
     int64_t ranks_len_, int64_t group_size),                                                      \
    (self, src, tag, ranks, ranks_len_, group_size),                                               \
    handles::broadcast_(tensor(self), src, tag, ints(ranks, ranks_len_), group_size);)             \
  X(reduce,                                                                                        \
    (AtenTensorHandle self, const char* reduce_op, int64_t dst, const char* tag,                   \
     const int64_t* ranks, int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),        \
    (self, reduce_op, dst, tag, ranks, ranks_len_, group_size, ret0),                              \
    *ret0 = new_handle(                                                                            \
        handles::reduce(tensor(self), reduce_op, dst, tag, ints(ranks, ranks_len_), group_size));) \
  X(gather,                                                                                        \
    (AtenTensorHandle self, int64_t dst, const char* tag, const int64_t* ranks,                    \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, dst, tag, ranks, ranks_len_, group_size, ret0),                                         \
    *ret0 =                                                                                        \
        new_handle(handles::gather(tensor(self), dst, tag, ints(ranks, ranks_len_), group_size));) \
  X(scatter,                                                                                       \
    (AtenTensorHandle self, int64_t src, const char* tag, const int64_t* ranks,                    \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, src, tag, ranks, ranks_len_, group_size, ret0),                                         \
    *ret0 = new_handle(                                                                            \
        handles::scatter(tensor(self), src, tag, ints(ranks, ranks_len_), group_size));)           \
  X(permute,                                                                                       \
    (AtenTensorHandle self, const int64_t* src_dst, int64_t src_dst_len_, const char* tag,         \
     const int64_t* ranks, int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),        \
    (self, src_dst, src_dst_len_, tag, ranks, ranks_len_, group_size, ret0),                       \
    *ret0 = new_handle(handles::permute(tensor(self), ints(src_dst, src_dst_len_), tag,            \
                                        ints(ranks, ranks_len_), group_size));)                    \
  X(isend,                                                                                         \
    (AtenTensorHandle self, int64_t dst, int64_t msg_tag, const char* tag, const int64_t* ranks,   \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, dst, msg_tag, tag, ranks, ranks_len_, group_size, ret0),                                \
    *ret0 = new_handle(                                                                            \
        handles::isend(tensor(self), dst, msg_tag, tag, ints(ranks, ranks_len_), group_size));)    \
  X(irecv,                                                                                         \
    (AtenTensorHandle self, int64_t src, int64_t msg_tag, const char* tag, const int64_t* ranks,   \
     int64_t ranks_len_, int64_t group_size, AtenTensorHandle* ret0),                              \
    (self, src, msg_tag, tag, ranks, ranks_len_, group_size, ret0),                                \
    *ret0 = new_handle(                                                                            \
        handles::irecv(tensor(self), src, msg_tag, tag, ints(ranks, ranks_len_), group_size));)    \
  X(batch_p2p_ops,                                                                                 \
    (const char** op_list, int64_t op_list_len_, const int64_t* peer_list, int64_t peer_list_len_, \
     const int64_t* msg_tag_list, int64_t msg_tag_list_len_, const AtenTensorHandle* tensors_,     \
     int64_t tensors_len_, const char* tag, const int64_t* ranks, int64_t ranks_len_,              \
     int64_t group_size, AtenTensorHandle* ret, int64_t ret_len_),                                 \
    (op_list, op_list_len_, peer_list, peer_list_len_, msg_tag_list, msg_tag_list_len_, tensors_,  \
     tensors_len_, tag, ranks, ranks_len_, group_size, ret, ret_len_),                             \
    return_list("batch_p2p_ops",                                                                   \
                handles::batch_p2p_ops(                                                            \
                    strings(op_list, op_list_len_), ints(peer_list, peer_list_len_),               \
                    ints(msg_tag_list, msg_tag_list_len_), tensors(tensors_, tensors_len_), tag,   \
                    ints(ranks, ranks_len_), group_size),                                          \
                ret, ret_len_);)                                                                   \
  X(wait_tensor, (AtenTensorHandle self), (self), handles::wait_tensor(tensor(self));)

namespace c10d_func {

// What libc10d_func hands to the exports library: one function pointer per op.
struct CShimEntries {
#define C10D_FUNC_C_SHIM_POINTER(op, parameters, ...) AOTITorchError(*op) parameters = nullptr;
  C10D_FUNC_C_SHIM_TABLE(C10D_FUNC_C_SHIM_POINTER)
#undef C10D_FUNC_C_SHIM_POINTER
};

}  // namespace c10d_func

// Exported by libc10d_func_c_shims: takes the entries (0), or refuses a table of another size (1).
extern "C" int c10d_func_install_c_shims(const c10d_func::CShimEntries* entries, size_t size);
