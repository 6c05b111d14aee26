#pragma once
// The list of operators, written once. Everything else is derived from it: the schemas
// (ops/schemas.cpp), the CPU, CUDA and Meta registrations (C10D_FUNC_IMPL_EVERY_OP), the Autograd
// registration (autograd/register_autograd.cpp), the dispatcher handles (ops/op_handles.h), and,
// through c10d_func._C.op_table(), inductor's lowerings (python/c10d_func/_lowerings.py) and the
// tests' op lists. Each op's C++ signature is declared once in ops/op_signatures.h.
//
// X(name, schema, tags, autograd, lowering, effects)
//   schema:   arguments and returns, appended to the name
//   tags:     pt2 (pt2_compliant_tag), or rows (also needs_contiguous_strides: the op indexes its
//             inputs by rows, so compilers must hand it dense inputs)
//   autograd: formula (a backward in autograd/), or none (torch's "not implemented" node:
//             messages and out= forms, which torch does not differentiate either)
//   lowering: out_of_place, in_place, reinplaced (clone + its in-place op on the clone, as torch
//             lowers its own all_reduce), or wait
//   effects:  pure, or effects (kept by dead-code elimination even when its output is unused:
//             a wait completes a collective; a message's peer waits for it)
//
// The in-place variants follow the convention for custom operators that mutate: the mutated
// argument is annotated (a!) and nothing is returned. A custom op returning an alias of its input
// (`-> Tensor(a!)`, as aten's in-place ops do) is refused by functionalization ("a custom
// (non-ATen) operator whose output has alias annotations") and so by torch.compile and opcheck.
// Messages: peers are indices in the group; msg_tag tells apart messages between the same two
// members (torch's `tag` of send/recv); isend returns an empty tensor to wait on.
#include <torch/library.h>

#define C10D_FUNC_OPS(X)                                                                           \
  X(all_reduce, "(Tensor self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor",    \
    pt2, formula, reinplaced, pure)                                                                \
  X(all_reduce_, "(Tensor(a!) self, str reduce_op, str tag, int[] ranks, int group_size) -> ()",   \
    pt2, formula, in_place, pure)                                                                  \
  X(all_reduce_coalesced,                                                                          \
    "(Tensor[] self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor[]", pt2,       \
    formula, reinplaced, pure)                                                                     \
  X(all_reduce_coalesced_,                                                                         \
    "(Tensor(a!)[] self, str reduce_op, str tag, int[] ranks, int group_size) -> ()", pt2,         \
    formula, in_place, pure)                                                                       \
  X(all_gather_into_tensor, "(Tensor self, str tag, int[] ranks, int group_size) -> Tensor", rows, \
    formula, out_of_place, pure)                                                                   \
  X(all_gather_into_tensor_out,                                                                    \
    "(Tensor self, str tag, int[] ranks, int group_size, *, Tensor(a!) out) -> ()", rows, none,    \
    in_place, pure)                                                                                \
  X(all_gather_into_tensor_coalesced,                                                              \
    "(Tensor[] self, str tag, int[] ranks, int group_size) -> Tensor[]", rows, formula,            \
    out_of_place, pure)                                                                            \
  X(reduce_scatter_tensor,                                                                         \
    "(Tensor self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor", rows, formula, \
    out_of_place, pure)                                                                            \
  X(reduce_scatter_tensor_out,                                                                     \
    "(Tensor self, str reduce_op, str tag, int[] ranks, int group_size, *, Tensor(a!) out) -> ()", \
    rows, none, in_place, pure)                                                                    \
  X(reduce_scatter_tensor_coalesced,                                                               \
    "(Tensor[] self, str reduce_op, str tag, int[] ranks, int group_size) -> Tensor[]", rows,      \
    formula, out_of_place, pure)                                                                   \
  X(all_to_all_single,                                                                             \
    "(Tensor self, SymInt[]? output_split_sizes, SymInt[]? input_split_sizes, str tag, "           \
    "int[] ranks, int group_size) -> Tensor",                                                      \
    rows, formula, out_of_place, pure)                                                             \
  X(broadcast, "(Tensor self, int src, str tag, int[] ranks, int group_size) -> Tensor", pt2,      \
    formula, reinplaced, pure)                                                                     \
  X(broadcast_, "(Tensor(a!) self, int src, str tag, int[] ranks, int group_size) -> ()", pt2,     \
    formula, in_place, pure)                                                                       \
  X(reduce,                                                                                        \
    "(Tensor self, str reduce_op, int dst, str tag, int[] ranks, int group_size) -> Tensor", pt2,  \
    formula, out_of_place, pure)                                                                   \
  X(gather, "(Tensor self, int dst, str tag, int[] ranks, int group_size) -> Tensor", rows,        \
    formula, out_of_place, pure)                                                                   \
  X(scatter, "(Tensor self, int src, str tag, int[] ranks, int group_size) -> Tensor", rows,       \
    formula, out_of_place, pure)                                                                   \
  X(permute, "(Tensor self, int[] src_dst, str tag, int[] ranks, int group_size) -> Tensor", pt2,  \
    formula, out_of_place, pure)                                                                   \
  X(isend, "(Tensor self, int dst, int msg_tag, str tag, int[] ranks, int group_size) -> Tensor",  \
    pt2, none, out_of_place, effects)                                                              \
  X(irecv, "(Tensor self, int src, int msg_tag, str tag, int[] ranks, int group_size) -> Tensor",  \
    pt2, none, out_of_place, effects)                                                              \
  X(batch_p2p_ops,                                                                                 \
    "(str[] op_list, int[] peer_list, int[] msg_tag_list, Tensor[] tensors, str tag, "             \
    "int[] ranks, int group_size) -> Tensor[]",                                                    \
    pt2, none, out_of_place, effects)                                                              \
  X(wait_tensor, "(Tensor self) -> Tensor", pt2, formula, wait, effects)

// Ops made of others, registered for CompositeImplicitAutograd (kernels/composite_kernels.cpp):
// they decompose before any device, Meta or Autograd kernel runs. X(name, schema, tags).
// wait_tensors: torch's newer batched wait, one wait_tensor per tensor in traced graphs.
#define C10D_FUNC_COMPOSITE_OPS(X) X(wait_tensors, "(Tensor[] tensors) -> Tensor[]", pt2)

// Registers, for every operator with kernels per key, the function of the same name found by
// unqualified lookup where the macro is expanded.
#define C10D_FUNC_IMPL_ONE(name, ...) m.impl(#name, &name);
#define C10D_FUNC_IMPL_EVERY_OP(m) C10D_FUNC_OPS(C10D_FUNC_IMPL_ONE)
