#pragma once
// monitored_barrier with Gloo's semantics and words (torch offers it on Gloo only; it is how
// users find the rank that hangs): every member but the first reports to it, and the first
// waits for each in rank order, within the timeout. A member that does not report is named
// there: "[Rank 0]: Rank 2 failed to pass monitoredBarrier in 2000 ms", or with wait_all_ranks
// every such member ("[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 2000 ms"). The
// others wait for the first member's release; where it fails, they fail at once with its
// finding (on Gloo they wait for their own timeout and learn nothing).
//
// It meets in the group's store, not on the communicator: it must work when a member is stuck
// in another collective, which is when it is used.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

namespace c10d_func {

// `store` is private to this barrier (one prefix per call, the same on every member); `rank` is
// the caller's group rank; `members` the group's global ranks (named after Gloo's words);
// `release_timeout` bounds how long a member other than the first waits for its release (the
// group's timeout, as on Gloo).
void monitored_barrier(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                       const std::vector<int64_t>& members, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds release_timeout, bool wait_all_ranks);

}  // namespace c10d_func
