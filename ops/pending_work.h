#pragma once
// The pending-work table: which output storage is still being written by which collective.
// A kernel records its output; wait_tensor takes the entry and blocks (CPU) until the Completion
// is done. Keyed by storage, so any view of an output finds its collective. Entries whose
// storage died without a wait are swept: the collective itself keeps alive what it touches, so
// dropping an output never leaks, crashes or deadlocks.
#include <ATen/core/Tensor.h>

#include "ops/communicator.h"

#include <memory>
#include <string>

namespace c10d_func {

struct PendingCollective {
  Completion completion;
  std::string op;          // "all_reduce"
  std::string group;       // GroupSpec::describe() + the chunk
  std::weak_ptr<Communicator> communicator; // marked failed if the collective fails
};

void record_pending(const at::Tensor& output, PendingCollective pending);

// Blocks until the collective writing `tensor` (if any) is done; raises, naming op and group,
// if it failed. A tensor with no pending collective returns at once.
void wait_pending(const at::Tensor& tensor);

// Number of entries still held (introspection and leak tests).
int64_t pending_count();

// Waits for everything recorded so far, ignoring failures (shutdown).
void drain_pending();

} // namespace c10d_func
