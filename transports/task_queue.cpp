// See task_queue.h.
#include "transports/task_queue.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <stdexcept>

namespace c10d_func {

TaskQueue::~TaskQueue() {
  stop();
}

void TaskQueue::run_here(std::unique_lock<std::mutex> lock, const std::function<void()>& work) {
  (void)run_here_then_push(std::move(lock), [&work] {
    work();
    return Rest{};
  });
}

Completion TaskQueue::push(std::unique_lock<std::mutex> lock, std::function<void()> work) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  if (stop_) {
    lock.unlock();
    done->setError(std::make_exception_ptr(
        std::runtime_error("the communicator is shutting down: the collective did not run")));
    return done;
  }
  tasks_.emplace_back(std::move(work), done);
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { serve(); });
  }
  lock.unlock();
  ready_.notify_all();
  let_waiter_run(done);
  return done;
}

Completion TaskQueue::run_here_then_push(std::unique_lock<std::mutex> lock,
                                         const std::function<Rest()>& first) {
  running_ = true;
  lock.unlock();
  Rest rest;
  bool rest_was_quiet = false;
  Completion done = completed();
  const auto finished = [&] {
    bool wake = false;
    {
      std::lock_guard<std::mutex> relock(mutex_);
      if (rest.work) {
        // Collectives issued while `first` ran were queued behind it: the rest goes before them.
        done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
        tasks_.emplace_front(std::move(rest.work), done);
        if (!worker_.joinable()) {
          worker_ = std::thread([this] { serve(); });
        }
      }
      running_ = false;
      // A quiet rest alone in the queue waits for its waiter or the next push.
      rest_was_quiet = rest.quiet;
      wake = waits_for_running() && !(rest.quiet && tasks_.size() == 1 && !stop_);
    }
    if (wake) {
      ready_.notify_all();
    }
  };
  try {
    rest = first();
  } catch (...) {
    rest = Rest{};
    finished();
    throw;
  }
  finished();
  if (!done->completed()) {
    let_waiter_run(done, /*nudge_when_exposed=*/rest_was_quiet);
  }
  return done;
}

void TaskQueue::let_waiter_run(const Completion& done, bool nudge_when_exposed) {
  std::function<void()> nudge;
  if (nudge_when_exposed) {
    // Handed out as a Future (expose_completion): a quiet rest must not wait for a waiter that
    // may never come through wait_completion.
    nudge = [queue = weak_from_this()] {
      if (auto alive = queue.lock()) {
        { std::lock_guard<std::mutex> lock(alive->mutex_); }
        alive->ready_.notify_all();
      }
    };
  }
  help_when_waited(
      done,
      [queue = weak_from_this(), key = done.get()] {
        if (auto alive = queue.lock()) {
          // The collective must not meet the waiter's Python dispatch modes, which would see the
          // transport's own tensor operations; the progress thread has none.
          c10::impl::ExcludeDispatchKeyGuard no_python(
              c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
          alive->run_if_next(key);
        }
      },
      std::move(nudge));
}

void TaskQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_.notify_all();
  end_progress_thread(worker_);  // it drains the queue and outlasts a waiter running a task
}

void TaskQueue::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    ready_.wait(lock, [&] { return !running_ && (stop_ || !tasks_.empty()); });
    if (tasks_.empty()) {
      return;
    }
    run_front(lock);
  }
}

void TaskQueue::run_if_next(const c10::ivalue::Future* done) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!running_ && !tasks_.empty() && tasks_.front().second.get() == done) {
    run_front(lock);
    const bool wake = waits_for_running();
    lock.unlock();
    if (wake) {
      ready_.notify_all();
    }
  }
}

void TaskQueue::run_front(std::unique_lock<std::mutex>& lock) {
  auto [work, done] = std::move(tasks_.front());
  tasks_.pop_front();
  running_ = true;
  lock.unlock();
  run_then_complete(work, done);
  lock.lock();
  running_ = false;
}

}  // namespace c10d_func
