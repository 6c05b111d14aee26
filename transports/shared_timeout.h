#pragma once
// A timeout that torch's set_timeout may change from any thread while collectives read it: what
// a transport bounds its waits by (Communicator::set_timeout).
#include <atomic>
#include <chrono>
#include <cstdint>

namespace c10d_func {

class SharedTimeout {
 public:
  explicit SharedTimeout(std::chrono::milliseconds timeout) : ms_(timeout.count()) {}
  std::chrono::milliseconds get() const {
    return std::chrono::milliseconds(ms_.load(std::memory_order_relaxed));
  }
  void set(std::chrono::milliseconds timeout) {
    ms_.store(timeout.count(), std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t> ms_;
};

}  // namespace c10d_func
