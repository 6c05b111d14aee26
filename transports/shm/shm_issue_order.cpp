// The order of one member's shm collectives; see shm_issue_order.h.
#include "transports/shm/shm_issue_order.h"

#include <c10/util/Exception.h>

#include "transports/shm/shm_layout.h"

#include <thread>

namespace c10d_func::shm {
namespace {

using Clock = std::chrono::steady_clock;

// About what copying `bytes` of private memory takes (at 8 GB/s): how long a collective that
// would otherwise copy its input waits for its peers instead.
std::chrono::nanoseconds copy_time(size_t bytes) {
  return std::chrono::nanoseconds(bytes / 8);
}

}  // namespace

IssueOrder::IssueOrder(const Communicator& owner, const Members& members, int64_t rank,
                       int64_t size, bool one_ordered_caller)
    : owner_(owner),
      members_(members),
      rank_(rank),
      size_(size),
      one_ordered_caller_(one_ordered_caller) {}

bool IssueOrder::peers_issued(uint64_t number, std::chrono::nanoseconds patience) const {
  const auto all_issued = [&] {
    for (int64_t m = 0; m < size_; ++m) {
      if (m != rank_ && members_.control(m).issued.load(std::memory_order_acquire) < number) {
        return false;
      }
    }
    return true;
  };
  for (int i = 0; i < kSpins; ++i) {
    if (all_issued()) {
      return true;
    }
    cpu_relax();
  }
  const auto deadline = Clock::now() + patience;
  for (int i = 0; i < kYields || Clock::now() < deadline; ++i) {
    if (all_issued()) {
      return true;
    }
    std::this_thread::yield();
  }
  return all_issued();
}

IssueOrder::Turn IssueOrder::take_turn(const char* op, size_t bytes, bool splits) {
  if (auto failed = owner_.failure()) {
    TORCH_CHECK(false, "c10d_func.", op, ": the shm communicator failed earlier: ", *failed);
  }
  std::unique_lock<std::mutex> lock = queue_->lock();
  const uint64_t number = ++issued_;
  members_.control(rank_).issued.store(number, std::memory_order_release);
  // One ordered caller cannot meet its peers in another order: every collective runs in the
  // call. Otherwise a small one does, once every peer has issued it too.
  if (!queue_->idle()) {
    return Turn{std::move(lock), op, false, false};
  }
  if (one_ordered_caller_) {
    return Turn{std::move(lock), op, true, true};
  }
  const bool small = bytes <= kInlineBytes;
  const bool ready = (small || splits) &&
                     peers_issued(number, small ? std::chrono::nanoseconds(0) : copy_time(bytes));
  return Turn{std::move(lock), op, small && ready, ready};
}

std::function<void()> IssueOrder::unless_failed(std::function<void()> work) const {
  return [this, work = std::move(work)] {
    if (auto failed = owner_.failure()) {
      TORCH_CHECK(false, "the shm communicator failed earlier: ", *failed);
    }
    work();
  };
}

Completion IssueOrder::submit(Turn turn, std::function<void()> work) {
  work = profiled(std::move(work));
  if (turn.in_call) {
    queue_->run_here(std::move(turn.lock), work);
    return completed();
  }
  return queue_->push(std::move(turn.lock), unless_failed(std::move(work)));
}

Completion IssueOrder::submit_split(Turn turn, std::function<std::function<void()>()> first) {
  auto rest = std::make_shared<std::function<void()>>();
  std::function<void()> start = profiled([first = std::move(first), rest] { *rest = first(); });
  return queue_->run_here_then_push(std::move(turn.lock),
                                    [this, start = std::move(start), rest]() -> TaskQueue::Rest {
                                      start();
                                      if (!*rest) {
                                        return {};
                                      }
                                      return {unless_failed(profiled(std::move(*rest)))};
                                    });
}

}  // namespace c10d_func::shm
