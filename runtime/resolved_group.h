#pragma once
// A group as one call sees it: the validated (tag, ranks, group_size), the caller's chunk and
// the communicator that serves it. Made by the registry (group_registry.h), held by pending work
// (pending_work.h) so a failure can name the group and mark its communicator.
#include "runtime/group_spec.h"
#include "transports/communicator.h"

#include <memory>
#include <string>

namespace c10d_func {

// A (device, tag, ranks, group_size) resolved for the calling process: the validated group, the
// caller's chunk and its communicator. Kernels get one per call from GroupRegistry::resolve,
// cached, so the per-call path parses, allocates and formats nothing.
struct ResolvedGroup {
  GroupSpec spec;
  Chunk chunk;
  std::shared_ptr<Communicator> communicator;

  // "tag='x', ranks=[0, 1, 2, 3], group_size=2, chunk [2, 3]": built only for messages.
  std::string describe() const;
};

}  // namespace c10d_func
