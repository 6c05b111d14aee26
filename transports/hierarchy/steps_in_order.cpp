// See steps_in_order.h.
#include "transports/hierarchy/steps_in_order.h"

#include "transports/call_scope.h"

#include <exception>
#include <optional>
#include <string>

namespace c10d_func {

void wait_for(const Completion& completion) {
  wait_completion(completion);
  if (completion->hasError()) {
    std::rethrow_exception(completion->exception_ptr());
  }
}

Completion StepsInOrder::submit(std::function<void()> steps, bool for_waiter) {
  if (for_waiter) {
    return queue_->push_for_waiter(queue_->lock(), queued(std::move(steps)));
  }
  return queue_->push(queue_->lock(), queued(std::move(steps)));
}

Completion StepsInOrder::submit_begun(std::function<TaskQueue::Rest()> begin,
                                      std::function<void()> steps) {
  std::unique_lock<std::mutex> lock = queue_->lock();
  if (!queue_->idle()) {
    return queue_->push(std::move(lock), queued(std::move(steps)));
  }
  return queue_->run_here_then_push(std::move(lock), [&]() -> TaskQueue::Rest {
    TaskQueue::Rest rest;
    profiled(failing_owner([&] { rest = begin(); }))();
    if (rest.work) {
      rest.work = queued(std::move(rest.work));
    }
    return rest;
  });
}

Completion StepsInOrder::in_order(std::function<Completion()> issue) {
  std::unique_lock<std::mutex> lock = queue_->lock();
  // Through the queue after a failure too, which refuses it (failing_owner) as every member
  // does, whether or not its queue was busy: none issues it to the part alone.
  if (!queue_->idle() || owner_.failed()) {
    return queue_->push(std::move(lock), queued([issue = std::move(issue)] { wait_for(issue()); }));
  }
  // Every earlier collective has issued its parts' calls: this one follows them on every member.
  lock.unlock();
  return issue();
}

std::function<void()> StepsInOrder::queued(std::function<void()> steps) {
  return profiled(StepDetail::carried(failing_owner(std::move(steps))));
}

std::function<void()> StepsInOrder::failing_owner(std::function<void()> steps) {
  return [this, steps = std::move(steps)] {
    if (auto earlier = owner_.failure()) {
      TORCH_CHECK(false, "the ", owner_.backend_name(), " communicator failed earlier: ", *earlier);
    }
    std::optional<std::string> why;
    bool everyone_there = false;
    try {
      steps();
    } catch (const c10::ValueError& error) {
      why = error.what_without_backtrace();
      everyone_there = true;
    } catch (const c10::Error& error) {
      why = error.what_without_backtrace();
    } catch (const std::exception& error) {
      why = error.what();
    }
    if (why) {
      // The members are out of step: fail the owner, which tells the members sharing its memory
      // at once (on_failed), then name who is missing.
      owner_.mark_failed(*why);
      // A ValueError is a value one member gave that does not fit another's (split sizes that do
      // not pair up): the members are all there, and a roll call would wait for those that
      // finished the collective, then name them as gone.
      TORCH_CHECK(false, everyone_there ? *why : roll_call_->explain(*why));
    }
  };
}

}  // namespace c10d_func
