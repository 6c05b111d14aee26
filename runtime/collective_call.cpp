// See collective_call.h.
#include "runtime/collective_call.h"

#include <cstring>

#include "runtime/debug_check.h"
#include "runtime/pending_work.h"
#include "transports/rendezvous.h"

#include <cstdlib>
#include <sstream>

namespace c10d_func {

namespace {

// "all_reduce float32[4, 2]; float32[3] sum" (dim 0 as "*" when members may differ in it),
// then the root or permutation the call names.
std::string fingerprint(std::string_view op, at::TensorList inputs, const MustAgree& agreed) {
  std::ostringstream out;
  out << op;
  for (size_t i = 0; i < inputs.size(); ++i) {
    out << (i ? "; " : " ") << inputs[i].scalar_type() << '[';
    const auto sizes = inputs[i].sizes();
    for (size_t d = 0; d < sizes.size(); ++d) {
      out << (d ? ", " : "");
      if (d == 0 && !agreed.same_rows) {
        out << '*';
      } else {
        out << sizes[d];
      }
    }
    out << ']';
  }
  if (!agreed.reduce_op.empty()) {
    out << ' ' << agreed.reduce_op;
  }
  if (agreed.root >= 0) {
    out << " root " << agreed.root;
  }
  if (!agreed.permutation.empty()) {
    out << " src_dst " << agreed.permutation;
  }
  return out.str();
}

// A completion that holds a value (a backend's future carries its output tensors) is detached,
// so the pending table keeps no tensor alive; one without a value is kept as it is.
Completion without_value(const Completion& completion) {
  return completion->elementType()->kind() == c10::TypeKind::NoneType ? completion
                                                                      : detached(completion);
}

// C10D_FUNC_BLOCKING=1, read once: every collective completes before its op returns (as
// TORCH_NCCL_BLOCKING_WAIT or CUDA_LAUNCH_BLOCKING do for theirs). For debugging, and for tools
// that read outputs without a wait (torch.library.opcheck compares outputs right away).
bool blocking() {
  static const bool enabled = [] {
    const char* value = std::getenv("C10D_FUNC_BLOCKING");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return enabled;
}

}  // namespace

void check_group_shape(std::string_view op, c10::ArrayRef<int64_t> ranks, int64_t group_size) {
  if (group_size > 0 && static_cast<int64_t>(ranks.size()) % group_size == 0 && !ranks.empty()) {
    return;
  }
  (void)GroupSpec::parse(op, "", ranks, group_size);  // raises with the full message
}

CollectiveCall::CollectiveCall(std::string_view op, at::TensorList inputs, std::string_view tag,
                               c10::ArrayRef<int64_t> ranks, int64_t group_size,
                               const MustAgree& agreed)
    : op_(op) {
  TORCH_INTERNAL_ASSERT(!inputs.empty());
  const c10::Device device = inputs[0].device();
  auto& registry = GroupRegistry::instance();
  group_ = registry.resolve(op, device, tag, ranks, group_size);
  if (debug_checks_enabled() && group_->chunk.size() > 1) {
    std::vector<int64_t> splits(agreed.input_splits.begin(), agreed.input_splits.end());
    splits.insert(splits.end(), agreed.output_splits.begin(), agreed.output_splits.end());
    check_members_agree(op, registry.world(op), shared_device(device), group_->spec.tag,
                        group_->chunk, fingerprint(op, inputs, agreed), splits);
  }
}

at::Tensor CollectiveCall::sendable(const at::Tensor& self) const {
  at::Tensor owned = self.contiguous();
  if (!owned.is_same(self) || !group_->communicator->reads_inputs_after_return(self.nbytes())) {
    return owned;
  }
  return group_->communicator->snapshot(self);
}

at::Tensor CollectiveCall::sendable_in_own_block(const at::Tensor& self,
                                                 const at::Tensor& output) const {
  at::Tensor owned = self.contiguous();
  if (!owned.is_same(self) || self.numel() == 0 ||
      !group_->communicator->reads_inputs_after_return(self.nbytes())) {
    return owned;
  }
  at::Tensor own =
      output.view(-1).narrow(0, index() * self.numel(), self.numel()).view(self.sizes());
  if (self.is_cpu()) {
    std::memcpy(own.data_ptr(), self.data_ptr(), self.nbytes());  // no intra-op thread pool
  } else {
    own.copy_(self);  // ordered on the current stream
  }
  return own;
}

void CollectiveCall::record(const at::Tensor& output, const Completion& completion) const {
  record_output(op_, group_, output, completion);
}

void record_output(std::string_view op, const std::shared_ptr<const ResolvedGroup>& group,
                   const at::Tensor& output, const Completion& completion) {
  // A completion done without error and bound to no device has nothing left to wait for. A CUDA
  // completion is done as soon as the collective is enqueued, but waiting on it still makes the
  // waiter's stream wait for the collective's event, so it is always recorded.
  if (completion->completed() && !completion->hasError() && completion->devices().empty()) {
    return;
  }
  record_pending(output, PendingCollective{without_value(completion), op, group});
  if (blocking()) {
    wait_pending(output);
  }
}

}  // namespace c10d_func
