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

Completion StepsInOrder::submit(std::function<void()> steps) {
  std::function<void()> work = [this, steps = std::move(steps)] {
    if (auto earlier = owner_.failure()) {
      TORCH_CHECK(false, "the ", owner_.backend_name(), " communicator failed earlier: ", *earlier);
    }
    std::optional<std::string> why;
    try {
      steps();
    } catch (const c10::Error& error) {
      why = error.what_without_backtrace();
    } catch (const std::exception& error) {
      why = error.what();
    }
    if (why) {
      // The members are out of step: fail the owner, which tells the members sharing its memory
      // at once (on_failed), then name who is missing.
      owner_.mark_failed(*why);
      TORCH_CHECK(false, roll_call_->explain(*why));
    }
  };
  return queue_->push(queue_->lock(), profiled(StepDetail::carried(std::move(work))));
}

}  // namespace c10d_func
