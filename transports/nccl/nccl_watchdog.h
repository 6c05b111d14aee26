#pragma once
// The NCCL watchdog: one thread watching every NCCL communicator's outstanding collectives. It
// aborts a communicator (ncclCommAbort, through Watched::abort) whose collective outlives its
// deadline or that reports an asynchronous error; the next use or wait of it raises, naming the
// op and the group.
#include <c10/core/Event.h>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace c10d_func::nccl {

using Clock = std::chrono::steady_clock;

// What the watchdog needs of a communicator.
class Watched {
 public:
  virtual ~Watched() = default;
  // NCCL's asynchronous error of the communicator, if any.
  virtual std::optional<std::string> async_error() const = 0;
  // Aborts the communicator; `reason` is what its next use and wait raise.
  virtual void abort(const std::string& reason) = 0;
};

// One thread watching every NCCL communicator's outstanding collectives.
class Watchdog {
 public:
  static Watchdog& instance() {
    static auto* watchdog = new Watchdog();  // never destroyed: its thread runs until exit
    return *watchdog;
  }

  void track(std::weak_ptr<Watched> communicator, std::shared_ptr<c10::Event> done,
             Clock::time_point deadline, std::string op) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(Entry{std::move(communicator), std::move(done), deadline, std::move(op)});
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();
    }
  }

 private:
  struct Entry {
    std::weak_ptr<Watched> communicator;
    std::shared_ptr<c10::Event> done;
    Clock::time_point deadline;
    std::string op;
  };

  void loop();

  std::mutex mutex_;
  std::deque<Entry> entries_;
  bool started_ = false;
};

}  // namespace c10d_func::nccl
