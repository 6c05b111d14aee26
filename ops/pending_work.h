#pragma once
// The pending-work table: which output storage is still being written by which collective.
// A kernel records its output; wait_tensor takes the entry and blocks (CPU) until the Completion
// is done. Keyed by storage, so any view of an output finds its collective. Entries whose
// storage died without a wait are swept: the collective itself keeps alive what it touches, so
// dropping an output never leaks, crashes or deadlocks.
#include <ATen/core/Tensor.h>

#include "ops/communicator.h"
#include "ops/group_registry.h"

#include <chrono>
#include <memory>
#include <string_view>

namespace c10d_func {

struct PendingCollective {
  Completion completion;
  std::string_view op; // "all_reduce": a literal of the kernel's
  // The group it ran in: named in errors (described only then), and its communicator is marked
  // failed if the collective fails.
  std::shared_ptr<const ResolvedGroup> group;
};

void record_pending(const at::Tensor& output, PendingCollective pending);

// Blocks until the collective writing `tensor` (if any) is done; raises, naming op and group,
// if it failed. A tensor with no pending collective returns at once.
void wait_pending(const at::Tensor& tensor);

// Number of entries still held (introspection and leak tests).
int64_t pending_count();

// Waits for everything recorded so far, ignoring failures (shutdown).
void drain_pending();

// At interpreter exit: takes every collective still recorded (issued, never waited) and gives
// them until `budget` to finish, so that peers waiting on this process's part are not cut off;
// what is still running then is abandoned (the process exits anyway). Returns how many were
// left unwaited and how many of those were abandoned.
struct ExitReport {
  int64_t unwaited = 0;
  int64_t abandoned = 0;
};
ExitReport settle_at_exit(std::chrono::milliseconds budget);

} // namespace c10d_func
