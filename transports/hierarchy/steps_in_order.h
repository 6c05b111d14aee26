#pragma once
// StepsInOrder: how a communicator spanning hosts runs its collectives, each several steps on
// its parts (shared memory inside a host, a TCP link or Gloo between hosts): one collective at a
// time in issue order, so that every member issues its parts' collectives in the same order, on
// a thread of its own or on the thread that waits the collective when it is next (task_queue.h:
// an issue-then-wait pays no hand-off between threads).
//
// The first step that fails fails the owner, which tells whoever shares its memory
// (Communicator::on_failed) and fails every later collective at once; its error names the
// members that are gone (a roll call in the store, roll_call.h), unless it is a c10::ValueError:
// members whose values do not fit one another's, all of them there.
#include "transports/communicator.h"
#include "transports/roll_call.h"
#include "transports/task_queue.h"

#include <functional>
#include <memory>

namespace c10d_func {

// Waits a part's collective, one step of a collective spanning hosts, and rethrows its failure
// (the step's caller, StepsInOrder::submit's work, then fails the whole collective).
void wait_for(const Completion& completion);

class StepsInOrder {
 public:
  StepsInOrder(Communicator& owner, std::shared_ptr<FailureRollCall> roll_call)
      : owner_(owner), roll_call_(std::move(roll_call)) {}

  // Queues `steps` behind the collectives issued before; its Completion fails with what they
  // threw, explained by the roll call. `for_waiter`: left to the thread that waits it, for the
  // queue's grace (TaskQueue::push_for_waiter).
  Completion submit(std::function<void()> steps, bool for_waiter = false);

  // When nothing is queued or running: runs `begin` in the calling thread as the next
  // collective (the part that sends this member's part, without waiting for a peer) and queues
  // the rest it returns ahead of anything issued meanwhile, waking the progress thread only if
  // the rest is not quiet (TaskQueue::Rest). Otherwise queues `steps`, the whole collective, as
  // submit does. Failures of either part fail the owner and are explained as submit's.
  Completion submit_begun(std::function<TaskQueue::Rest()> begin, std::function<void()> steps);

  // A collective of a part that runs on its own (the flat communicator over every member, whose
  // collectives Gloo orders by when they are issued), kept in issue order with the queued ones:
  // `issue` is called here when nothing is queued or running, else queued behind them (called and
  // waited by whichever thread runs the queue). A queued collective may issue one on that part
  // too (an all_to_all decides between its steps and the flat communicator only once the host's
  // members have shared their sizes), so issuing a later one at once could put the two in
  // another order on another member.
  Completion in_order(std::function<Completion()> issue);

  // Runs what is queued, then ends the thread: the owner calls it before its parts go.
  void stop() { queue_->stop(); }

 private:
  // `steps`, failing the owner and naming the missing members when they throw.
  std::function<void()> failing_owner(std::function<void()> steps);
  // `steps` as the queue runs them: failing the owner, under the detail current here, profiled
  // under the collective's name on whichever thread runs them.
  std::function<void()> queued(std::function<void()> steps);

  Communicator& owner_;
  std::shared_ptr<FailureRollCall> roll_call_;  // in the chunk's store
  std::shared_ptr<TaskQueue> queue_ = TaskQueue::create();
};

}  // namespace c10d_func
