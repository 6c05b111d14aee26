// The one TORCH_LIBRARY(c10d_func, m): every operator's schema, declared once. Kernels live in
// kernels/cpu, kernels/cuda, meta and autograd, each registered for its own dispatch key.
//
// The in-place variants follow the convention for custom operators that mutate: the mutated
// argument is annotated (a!) and nothing is returned. A custom op returning an alias of its input
// (`-> Tensor(a!)`, as aten's in-place ops do) is refused by functionalization ("a custom
// (non-ATen) operator whose output has alias annotations") and so by torch.compile and opcheck.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

TORCH_LIBRARY(c10d_func, m) {
  const std::vector<at::Tag> pt2{at::Tag::pt2_compliant_tag};
  // Gather/scatter-type ops index their inputs by rows: compilers must hand them dense inputs.
  const std::vector<at::Tag> rows{at::Tag::pt2_compliant_tag, at::Tag::needs_contiguous_strides};

  m.def("all_reduce(Tensor self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor", pt2);
  m.def("all_reduce_(Tensor(a!) self, str reduce_op, str tag, int[] ranks, int group_size) -> ()", pt2);
  m.def("all_reduce_coalesced(Tensor[] self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor[]", pt2);
  m.def("all_reduce_coalesced_(Tensor(a!)[] self, str reduce_op, str tag, int[] ranks, int group_size) -> ()", pt2);
  m.def("all_gather_into_tensor(Tensor self, str tag, int[] ranks, int group_size) -> Tensor", rows);
  m.def("all_gather_into_tensor_coalesced(Tensor[] self, str tag, int[] ranks, int group_size) -> Tensor[]", rows);
  m.def("all_gather_into_tensor_out(Tensor self, str tag, int[] ranks, int group_size, *, Tensor(a!) out) -> ()", rows);
  m.def("reduce_scatter_tensor(Tensor self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor", rows);
  m.def("reduce_scatter_tensor_coalesced(Tensor[] self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor[]", rows);
  m.def("reduce_scatter_tensor_out(Tensor self, str reduce_op, str tag, int[] ranks, int group_size, *, Tensor(a!) out) -> ()", rows);
  m.def("all_to_all_single(Tensor self, SymInt[]? output_split_sizes, SymInt[]? input_split_sizes, str tag, int[] ranks, int group_size) -> Tensor", rows);
  m.def("broadcast(Tensor self, int src, str tag, int[] ranks, int group_size) -> Tensor", pt2);
  m.def("broadcast_(Tensor(a!) self, int src, str tag, int[] ranks, int group_size) -> ()", pt2);
  m.def("reduce(Tensor self, str reduce_op, int dst, str tag, int[] ranks, int group_size) -> Tensor", pt2);
  m.def("gather(Tensor self, int dst, str tag, int[] ranks, int group_size) -> Tensor", rows);
  m.def("scatter(Tensor self, int src, str tag, int[] ranks, int group_size) -> Tensor", rows);
  m.def("permute(Tensor self, int[] src_dst, str tag, int[] ranks, int group_size) -> Tensor", pt2);
  // Point-to-point: peers are indices in the group; msg_tag tells apart messages between the
  // same two members (torch's `tag` of send/recv). isend returns an empty tensor to wait on.
  m.def("isend(Tensor self, int dst, int msg_tag, str tag, int[] ranks, int group_size) -> Tensor", pt2);
  m.def("irecv(Tensor self, int src, int msg_tag, str tag, int[] ranks, int group_size) -> Tensor", pt2);
  m.def("batch_p2p_ops(str[] op_list, int[] peer_list, int[] msg_tag_list, Tensor[] tensors, str tag, int[] ranks, int group_size) -> Tensor[]", pt2);
  m.def("wait_tensor(Tensor self) -> Tensor", pt2);
  // The batched wait (torch's newer API): a composite of wait_tensor, so traced graphs hold one
  // wait per tensor and every dispatch key's behaviour is wait_tensor's.
  m.def("wait_tensors(Tensor[] tensors) -> Tensor[]", pt2);
}
