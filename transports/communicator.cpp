// The failure flag shared by every Communicator; see communicator.h.
#include "transports/communicator.h"

namespace c10d_func {

void Communicator::mark_failed(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_) {
      return;
    }
    failure_ = reason;
    failed_.store(true, std::memory_order_release);
  }
  on_failed(reason);
}

std::optional<std::string> Communicator::failure() const {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_) {
      return failure_;
    }
  }
  const Communicator* source = failure_source();
  return source != nullptr ? source->failure() : std::nullopt;
}

}  // namespace c10d_func
