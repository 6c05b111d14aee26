// Completion helpers and the failure flag shared by every Communicator; see communicator.h.
#include "ops/communicator.h"

#include <ATen/core/LegacyTypeDispatch.h>

namespace c10d_func {

Completion completed() {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  done->markCompleted(c10::IValue());
  return done;
}

Completion detached(const Completion& upstream) {
  return upstream->then(
      [](c10::ivalue::Future& parent) -> c10::IValue {
        (void)parent.value(); // rethrows the collective's error into the child
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
      [finish = std::move(finish),
       storage = written.has_storage()
           ? std::optional<c10::ivalue::Future::WeakStorage>(written.storage().getWeakStorageImpl())
           : std::nullopt](
          c10::ivalue::Future& parent) -> std::tuple<c10::IValue, Storages> {
        // value() rethrows the collective's error, so `then` marks the child failed with it.
        (void)parent.value();
        // Finishing writes data only. It runs on a transport thread, after autograd may have
        // wrapped the output it writes, so it must never be recorded by autograd.
        at::AutoDispatchBelowADInplaceOrView below;
        finish();
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

} // namespace c10d_func
