#pragma once
// CollectiveCall: the steps every kernel shares once its own arguments are checked: resolve the
// group (validated against the world on its first use, cached after), find the caller's chunk
// and its communicator, and record outputs in the pending-work table so wait_tensor finds them.
#include <ATen/core/Tensor.h>

#include "runtime/group_registry.h"
#include "transports/communicator.h"

#include <memory>
#include <string_view>

namespace c10d_func {

// What the members of one call must agree on beyond their inputs' dtypes and shapes, compared
// under C10D_FUNC_DEBUG=DETAIL on every transport. Views of the kernel's arguments, read only
// while the call is made (and formatted only when the check is on).
struct MustAgree {
  std::string_view reduce_op;   // "sum"
  int64_t root = -1;            // src or dst
  at::IntArrayRef permutation;  // permute's src_dst
  // all_to_all_single: members may differ in dim 0; their splits must pair up instead.
  bool same_rows = true;
  at::IntArrayRef input_splits, output_splits;
};

class CollectiveCall {
 public:
  // `op` must outlive the call's pending work (kernels pass string literals). `inputs` give the
  // device and, with `agreed`, what the members compare under C10D_FUNC_DEBUG=DETAIL.
  CollectiveCall(std::string_view op, at::TensorList inputs, std::string_view tag,
                 c10::ArrayRef<int64_t> ranks, int64_t group_size, const MustAgree& agreed = {});

  Communicator& communicator() const { return *group_->communicator; }
  int64_t group_size() const { return group_->spec.group_size; }
  int64_t index() const { return group_->chunk.index; }

  // What a collective may send of `self`: a private contiguous copy when the transport reads its
  // inputs after the call returns (the caller may write to its tensor at once, and inductor
  // reuses buffers as soon as an op returns), otherwise `self` made contiguous.
  at::Tensor sendable(const at::Tensor& self) const;
  // What all_gather may send of `self`: where sendable() would copy, the caller's own block of
  // `output` filled with `self` now (where its input ends up anyway) instead of a private copy;
  // every transport gathers in place from there (NCCL's in-place all_gather layout).
  at::Tensor sendable_in_own_block(const at::Tensor& self, const at::Tensor& output) const;

  // `output` stays pending until `completion` is done.
  void record(const at::Tensor& output, const Completion& completion) const;

 private:
  std::string_view op_;
  std::shared_ptr<const ResolvedGroup> group_;
  // The op's caller may write its inputs once the op returns (a transport that decides per call
  // protects what it still reads after returning), and its result is waited through wait_tensor
  // (a transport may leave the rest to the waiter).
  FunctionalOpCall functional_op_call_;
};

// `output` stays pending until `completion` is done: CollectiveCall::record for calls that find
// their group another way (messages). `op` must outlive the pending work (a literal).
void record_output(std::string_view op, const std::shared_ptr<const ResolvedGroup>& group,
                   const at::Tensor& output, const Completion& completion);

// Checks what needs neither a world nor a cache: group_size positive and dividing len(ranks).
// Kernels call it before checking arguments that are indices into the group (src, dst).
void check_group_shape(std::string_view op, c10::ArrayRef<int64_t> ranks, int64_t group_size);

}  // namespace c10d_func
