// See collective_call.h.
#include "ops/collective_call.h"

#include "ops/debug_check.h"
#include "ops/group_registry.h"
#include "ops/pending_work.h"

#include <sstream>

namespace c10d_func {

namespace {

// "all_reduce float32[4, 2]; float32[3]" (dim 0 as "*" when members may differ in it).
std::string fingerprint(std::string_view op, at::TensorList inputs, bool same_rows) {
  std::ostringstream out;
  out << op;
  for (size_t i = 0; i < inputs.size(); ++i) {
    out << (i ? "; " : " ") << inputs[i].scalar_type() << '[';
    const auto sizes = inputs[i].sizes();
    for (size_t d = 0; d < sizes.size(); ++d) {
      out << (d ? ", " : "");
      if (d == 0 && !same_rows) {
        out << '*';
      } else {
        out << sizes[d];
      }
    }
    out << ']';
  }
  return out.str();
}

} // namespace

CollectiveCall::CollectiveCall(std::string_view op, at::TensorList inputs, GroupSpec spec,
                               bool same_rows)
    : op_(op), spec_(std::move(spec)) {
  TORCH_INTERNAL_ASSERT(!inputs.empty());
  const c10::Device device = inputs[0].device();
  auto& registry = GroupRegistry::instance();
  const World world = registry.world(op);
  spec_.check_world(op, world.size);
  chunk_ = spec_.chunk_of(op, world.rank);
  communicator_ = registry.communicator(op, device, spec_, chunk_);
  if (debug_checks_enabled()) {
    check_members_agree(op, world, device.str(), spec_.tag, chunk_,
                        fingerprint(op, inputs, same_rows));
  }
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
