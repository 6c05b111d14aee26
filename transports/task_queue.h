#pragma once
// TaskQueue: the collectives of one communicator that did not run inside their call, run one at
// a time in issue order, on a progress thread of the queue's own or in a thread that waits one.
//
// A waiter would block anyway, so when the collective it waits is next and nothing runs, it runs
// the collective itself: a small collective then costs no hand-off to the progress thread and
// back (two wake-ups, more than its bytes cost), and a peer that arrived late does not pay the
// early member's thread switches. The progress thread still runs whatever nobody waits, so a
// collective completes whatever the callers do (no caller ever blocks on a peer's caller). The
// one exception is a quiet rest (Rest): what is left of a collective whose part for the peers
// went out in its call, so no peer depends on this process for it; it waits for its waiter or
// the progress thread's next wake-up.
//
// A collective may also be queued for its waiter (push_for_waiter): where a progress thread's
// wake-up costs more than the collective (a host with more ranks' threads than cores), a small
// one waited soon after its call runs in the waiter's thread with no thread woken at all. If no
// waiter has come within the queue's grace (kWaiterGrace), the progress thread runs it, so it
// completes whatever the caller does; the thread then checks the queue once per grace while
// such pushes keep coming, instead of being woken for each.
//
// Callers that run a collective in the call (nothing queued or running, see idle) hold the
// queue's lock from that decision until run_here or push, so that no collective issued
// meanwhile by another thread overtakes theirs.
#include "transports/communicator.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace c10d_func {

class TaskQueue : public std::enable_shared_from_this<TaskQueue> {
 public:
  // How long a collective queued for its waiter waits for one before the progress thread runs
  // it: longer than a call and its wait take, short beside a peer's timeout.
  static constexpr std::chrono::microseconds kWaiterGrace{1000};

  static std::shared_ptr<TaskQueue> create(std::chrono::microseconds grace = kWaiterGrace) {
    return std::shared_ptr<TaskQueue>(new TaskQueue(grace));
  }
  ~TaskQueue();

  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }
  // Nothing queued and nothing running (the caller holds the lock).
  bool idle() const { return tasks_.empty() && !running_; }

  // Runs `work` in this thread as the next collective (the caller found the queue idle under
  // `lock`, released here); rethrows what it threw.
  void run_here(std::unique_lock<std::mutex> lock, const std::function<void()>& work);

  // What a collective begun in a call leaves for later: `work` (none: nothing), and whether it
  // is quiet: no peer needs this process to run it (its part went out in the call), so it waits
  // for its waiter, or for the progress thread's next wake-up (any later push), instead of
  // waking the progress thread now: a collective waited soon after its call then costs no
  // thread switch at all.
  struct Rest {
    std::function<void()> work;
    bool quiet = false;
  };

  // Runs `first` in this thread as the next collective (as run_here), then queues the rest it
  // returns (the part that waits for the peers, if any) ahead of anything issued meanwhile, and
  // returns the rest's Completion (a completed one when there is no rest).
  Completion run_here_then_push(std::unique_lock<std::mutex> lock,
                                const std::function<Rest()>& first);

  // Queues `work` behind everything issued before (`lock` released here); its Completion is
  // finished by the progress thread or by a waiter, with its outcome.
  Completion push(std::unique_lock<std::mutex> lock, std::function<void()> work);

  // As push, but left to its waiter for the queue's grace (see above): the progress thread runs
  // it only once the grace has passed, when it is handed out as a Future (expose_completion), or
  // to reach a collective queued behind it by push.
  Completion push_for_waiter(std::unique_lock<std::mutex> lock, std::function<void()> work);

  // Runs what is queued, then ends the progress thread; later pushes fail their Completion.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Task {
    std::function<void()> work;
    Completion done;
    Clock::time_point waiter_until{};  // until then left to its waiter (push_for_waiter)
  };

  explicit TaskQueue(std::chrono::microseconds grace) : grace_(grace) {}
  Completion enqueue(std::unique_lock<std::mutex> lock, std::function<void()> work,
                     bool for_waiter);
  void serve();
  // Until when the progress thread leaves the front collective to its waiter (under the lock;
  // the past: it runs it now). Not when stopping or when a collective for anyone waits behind.
  Clock::time_point front_left_until() const;
  // Ends the grace of the collective whose Completion is `done` (handed out as a Future) and
  // wakes the progress thread.
  void hurry(const c10::ivalue::Future* done);
  // A waiter of `done`: runs it here when it is next, with the collectives left to their waiters
  // ahead of it.
  void run_if_next(const c10::ivalue::Future* done);
  void run_front(std::unique_lock<std::mutex>& lock);
  // Whether the progress thread may be waiting for `running_` to clear (under the lock): only
  // when there is something for it to do. Waking it otherwise would cost every collective run
  // in a call a thread switch.
  bool waits_for_running() const {
    return stop_ || (!tasks_.empty() && front_left_until() <= Clock::now());
  }
  // Lets a thread that waits `done` run it when it is next; `nudge_when_exposed` (a quiet rest,
  // or one left to its waiter): handing it out as a Future has the progress thread run it.
  void let_waiter_run(const Completion& done, bool nudge_when_exposed = false);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;
  bool running_ = false;  // a collective runs: in a call, on the progress thread or in a waiter
  bool stop_ = false;
  const std::chrono::microseconds grace_;
  Clock::time_point last_for_waiter_{};  // the latest push_for_waiter
  // The progress thread sleeps until a deadline no later than any new push_for_waiter's grace
  // ends: such a push need not wake it.
  bool timed_sleep_ = false;
  std::thread worker_;
};

}  // namespace c10d_func
