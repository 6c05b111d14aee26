// See collective_call.h.
#include "ops/collective_call.h"

#include "ops/group_registry.h"
#include "ops/pending_work.h"

namespace c10d_func {

CollectiveCall::CollectiveCall(std::string_view op, c10::Device device, GroupSpec spec)
    : op_(op), spec_(std::move(spec)) {
  auto& registry = GroupRegistry::instance();
  const World world = registry.world(op);
  spec_.check_world(op, world.size);
  chunk_ = spec_.chunk_of(op, world.rank);
  communicator_ = registry.communicator(op, device, spec_, chunk_);
}

void CollectiveCall::record(const at::Tensor& output, const Completion& completion) const {
  if (completion->completed() && !completion->hasError()) {
    return; // nothing to wait for
  }
  record_pending(
      output,
      PendingCollective{detached(completion), op_, spec_.describe() + ", chunk " + chunk_.describe(),
                        communicator_});
}

} // namespace c10d_func
