#pragma once
// Pending work: which output storage is still being written by which collective, shared with
// torch. Every recorded collective becomes a c10d::Work registered in torch's own work registry
// (c10d::register_work), so whatever waits a tensor waits it: c10d_func's wait_tensor, torch's
// _c10d_functional.wait_tensor and the C shim that inductor's C++ wrapper and AOTInductor call
// (aoti_torch_cpu__c10d_functional_wait_tensor), and either library's AsyncCollectiveTensor.
// c10d_func's wait_tensor waits through torch's registry too, so a Work that torch or a user
// registered (torch._C._distributed_c10d._register_work) is waited as well.
//
// Beside torch's registry, a table of our own keeps what torch's does not offer: outputs dropped
// without a wait are swept from both (torch's never forgets an entry), shutdown() drains every
// collective, exit settles them, and pending_count() counts them.
#include <ATen/core/Tensor.h>

#include "runtime/resolved_group.h"
#include "transports/communicator.h"

#include <chrono>
#include <memory>
#include <string_view>

namespace c10d_func {

struct PendingCollective {
  Completion completion;
  std::string_view op;  // "all_reduce": a literal of the kernel's
  // The group it ran in: named in errors (described only then), and its communicator is marked
  // failed if the collective fails (messages have none: they run on channels of their own).
  std::shared_ptr<const ResolvedGroup> group;
};

void record_pending(const at::Tensor& output, PendingCollective pending);

// Blocks until every collective writing `tensor` (c10d_func's, or any Work registered for it in
// torch's registry) is done; raises, naming op and group, if one failed. A tensor with no pending
// collective returns at once.
void wait_pending(const at::Tensor& tensor);

// Number of c10d_func collectives still recorded (introspection and leak tests).
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

}  // namespace c10d_func
