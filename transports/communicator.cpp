// Completion helpers and the failure flag shared by every Communicator; see communicator.h.
#include "transports/communicator.h"

#include <ATen/core/LegacyTypeDispatch.h>

namespace c10d_func {

Completion completed() {
  // One shared instance: a completed Future never changes, and callbacks added to it run at once.
  static const Completion done = [] {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
    future->markCompleted(c10::IValue());
    return future;
  }();
  return done;
}

Completion detached(const Completion& upstream) {
  return upstream->then(
      [](c10::ivalue::Future& parent) -> c10::IValue {
        (void)parent.value();  // rethrows the collective's error into the child
        return c10::IValue();
      },
      c10::NoneType::get());
}

Completion then_run(const Completion& upstream, const at::Tensor& written,
                    std::function<void()> finish) {
  if (!finish) {
    return upstream;
  }
  using Storages = std::vector<c10::ivalue::Future::WeakStorage>;
  return upstream->then(
      [pending = std::make_shared<std::function<void()>>(std::move(finish)),
       storage = written.has_storage() ? std::optional<c10::ivalue::Future::WeakStorage>(
                                             written.storage().getWeakStorageImpl())
                                       : std::nullopt](
          c10::ivalue::Future& parent) -> std::tuple<c10::IValue, Storages> {
        // Whatever happens, the tensors `finish` holds are released before the result completes:
        // releasing one that Python still references takes the GIL, which a transport thread
        // must not try to take once the interpreter, told the work is done, may be shutting down.
        std::function<void()> release = std::move(*pending);
        *pending = nullptr;
        // value() rethrows the collective's error, so `then` marks the child failed with it.
        (void)parent.value();
        // Finishing writes data only. It runs on a transport thread, after autograd may have
        // wrapped the output it writes, so it must never be recorded by autograd.
        at::AutoDispatchBelowADInplaceOrView below;
        release();
        release = nullptr;
        Storages storages;
        if (storage && !storage->expired()) {
          storages.push_back(*storage);
        }
        return {c10::IValue(), std::move(storages)};
      },
      c10::NoneType::get());
}

void Communicator::mark_failed(const std::string& reason) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (!failure_) {
    failure_ = reason;
    failed_.store(true, std::memory_order_release);
  }
}

std::optional<std::string> Communicator::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

}  // namespace c10d_func
