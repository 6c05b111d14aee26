// See op_deadline.h.
#include "backend/op_deadline.h"

#include "transports/roll_call.h"

#include <ATen/core/jit_type.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <thread>
#include <vector>

namespace c10d_func {
namespace {

using Clock = std::chrono::steady_clock;

// One thread for the process's deadlines: each runs its action once its time comes. Made once
// and never destroyed (an action may still be due while the process exits).
class Deadlines {
 public:
  static Deadlines& instance() {
    static auto* deadlines = new Deadlines();
    return *deadlines;
  }

  void at(Clock::time_point when, std::function<void()> action) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      due_.push(Entry{when, sequence_++, std::move(action)});
    }
    changed_.notify_one();
  }

 private:
  struct Entry {
    Clock::time_point when;
    uint64_t sequence;  // ties keep their order
    std::function<void()> action;
    bool operator>(const Entry& other) const {
      return when != other.when ? when > other.when : sequence > other.sequence;
    }
  };

  Deadlines() {
    std::thread([this] { run(); }).detach();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      if (due_.empty()) {
        changed_.wait(lock);
        continue;
      }
      const auto when = due_.top().when;
      if (Clock::now() < when) {
        changed_.wait_until(lock, when);
        continue;
      }
      auto action = std::move(const_cast<Entry&>(due_.top()).action);
      due_.pop();
      lock.unlock();
      action();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> due_;
  uint64_t sequence_ = 0;
};

}  // namespace

Completion bounded_by(const Completion& upstream, OpDeadline deadline) {
  auto bounded = c10::make_intrusive<c10::ivalue::Future>(upstream->elementType());
  // Whichever comes first, the collective's end or its deadline, settles `bounded`.
  auto settled = std::make_shared<std::atomic<bool>>(false);
  auto shared = std::make_shared<const OpDeadline>(std::move(deadline));
  upstream->addCallback([bounded, settled, shared](c10::ivalue::Future& done) {
    if (settled->exchange(true)) {
      return;
    }
    if (done.hasError()) {
      try {
        answer_roll_call(shared->roll_call, shared->occasion);
      } catch (const std::exception&) {
        // No thread to answer with (system_error, bad_alloc): the peers' roll call names this
        // member as unresponsive, and the error below still reaches the waiter.
      }
      bounded->setError(done.exception_ptr());
    } else {
      bounded->markCompleted(done.value());
    }
  });
  chain_deferred_wait(upstream, bounded);
  Deadlines::instance().at(Clock::now() + shared->timeout, [bounded, settled, shared] {
    if (settled->exchange(true)) {
      return;
    }
    // Fails the communicator and the call with `reason`, whatever else went wrong.
    const auto give_up = [bounded, shared](const std::string& reason) {
      if (auto communicator = shared->communicator.lock()) {
        communicator->mark_failed(reason);
      }
      bounded->setError(std::make_exception_ptr(std::runtime_error(reason)));
    };
    const std::string late =
        "c10d_func backend: " + shared->what + " did not complete within its timeout of " +
        std::to_string(shared->timeout.count()) + " ms (the call's Options.timeout); ";
    // The roll call waits up to its bound: not on the thread that serves every deadline.
    try {
      std::thread([give_up, shared, late] {
        try {
          const auto bound = roll_call_bound(shared->timeout);
          give_up(late + findings_of(call_the_roll(shared->roll_call, shared->occasion, bound),
                                     bound, {}));
        } catch (const std::exception& error) {
          give_up(late + "the roll call failed (" + error.what() + ")");
        }
      }).detach();
    } catch (const std::exception& error) {
      give_up(late + "no roll call (" + error.what() + ")");
    }
  });
  return bounded;
}

}  // namespace c10d_func
