// Last references parked by background threads; see deferred_release.h.
#include "runtime/deferred_release.h"

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace c10d_func {
namespace {

struct Parked {
  std::mutex mutex;
  std::vector<c10::IValue> held;
  std::atomic<bool> any{false};  // lets release_parked skip the lock when nothing is parked
};

Parked& parked() {
  static auto* state = new Parked();  // never destroyed: threads may park during exit
  return *state;
}

}  // namespace

void park_release(c10::IValue held) {
  auto& state = parked();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.held.push_back(std::move(held));
  state.any.store(true, std::memory_order_release);
}

void release_parked() {
  auto& state = parked();
  if (!state.any.load(std::memory_order_acquire)) {
    return;
  }
  std::vector<c10::IValue> letting_go;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    letting_go.swap(state.held);
    state.any.store(false, std::memory_order_release);
  }
  // Let go of here, outside the lock: a tensor's release may wait for the GIL.
}

}  // namespace c10d_func
