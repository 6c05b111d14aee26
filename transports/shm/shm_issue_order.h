#pragma once
// The order in which one member's shm collectives run: each is numbered and published in the
// member's control block when issued (take_turn), then runs inside the call or is queued
// (submit), in issue order either way. A small one runs in the call when nothing is queued and
// every peer has issued it too; a large all_to_all or broadcast root may run in the call the
// part that reads its input and queue the rest (submit_split). Everything else is queued for the
// progress thread, or the thread that waits it when it is next (task_queue.h). So a caller never
// blocks on a peer that has not issued the collective (shm_communicator.cpp, "Progress").
#include "transports/communicator.h"
#include "transports/shm/shm_members.h"
#include "transports/task_queue.h"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

namespace c10d_func::shm {

class IssueOrder {
 public:
  // This member's turn to issue a collective: numbered and published, and whether it runs
  // inside the call. The lock, held until submit, keeps a collective issued meanwhile by another
  // thread from overtaking this one.
  struct Turn {
    std::unique_lock<std::mutex> lock;
    const char* op;
    bool in_call;
    // Nothing queued and every peer has issued it: a large collective may do inside the call
    // the part that reads its input (see all_to_all), without blocking on a peer's caller.
    bool peers_ready;
  };

  // `owner`'s failure stops what is queued; `members` holds the control blocks.
  // `one_ordered_caller`: Rendezvous::one_ordered_caller (every collective runs in the call).
  IssueOrder(const Communicator& owner, const Members& members, int64_t rank, int64_t size,
             bool one_ordered_caller);

  // Ends the progress thread; what is queued after this is not run.
  void stop() { queue_->stop(); }

  // A collective of `bytes` named `op`. `splits`: a large collective that can do the part that
  // reads its input inside the call (all_to_all, a broadcast root; all of it for an out-of-place
  // all_reduce or a reduce_scatter) waits up to what a copy of that input would take for its
  // peers to issue it too.
  Turn take_turn(const char* op, size_t bytes, bool splits = false);

  // Runs `work` inside the call, or queues it for the progress thread (or the thread that waits
  // it, task_queue.h), as `turn` decided; either way in issue order.
  Completion submit(Turn turn, std::function<void()> work);

  // Runs inside the call the part of a collective that `first` does (all that reads the
  // caller's input) and queues the rest it returns, as the next collective. Both parts are
  // profiled under the collective's name (issued on this thread).
  Completion submit_split(Turn turn, std::function<std::function<void()>()> first);

 private:
  // Whether every peer has issued collective `number`, waiting briefly (spinning, then
  // yielding, at least `patience`) for those that have not yet: peers usually arrive within
  // microseconds of each other.
  bool peers_issued(uint64_t number, std::chrono::nanoseconds patience) const;
  // The work of a queued collective: refused once the communicator has failed.
  std::function<void()> unless_failed(std::function<void()> work) const;

  const Communicator& owner_;
  const Members& members_;
  int64_t rank_;
  int64_t size_;
  bool one_ordered_caller_;
  std::shared_ptr<TaskQueue> queue_ = TaskQueue::create();
  uint64_t issued_ = 0;  // under the queue's lock: collectives issued, as in our control block
};

}  // namespace c10d_func::shm
