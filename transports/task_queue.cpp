// See task_queue.h.
#include "transports/task_queue.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
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
  return enqueue(std::move(lock), std::move(work), /*for_waiter=*/false);
}

Completion TaskQueue::push_for_waiter(std::unique_lock<std::mutex> lock,
                                      std::function<void()> work) {
  return enqueue(std::move(lock), std::move(work), /*for_waiter=*/true);
}

Completion TaskQueue::enqueue(std::unique_lock<std::mutex> lock, std::function<void()> work,
                              bool for_waiter) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  if (stop_) {
    lock.unlock();
    done->setError(std::make_exception_ptr(
        std::runtime_error("the communicator is shutting down: the collective did not run")));
    return done;
  }
  Task task{std::move(work), done};
  if (for_waiter) {
    last_for_waiter_ = Clock::now();
    task.waiter_until = last_for_waiter_ + grace_;
  }
  tasks_.push_back(std::move(task));
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { serve(); });
  }
  // A thread asleep with no deadline would never look at a collective left to its waiter.
  const bool wake = !for_waiter || !timed_sleep_;
  lock.unlock();
  if (wake) {
    ready_.notify_all();
  }
  let_waiter_run(done, /*nudge_when_exposed=*/for_waiter);
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
        tasks_.push_front(Task{std::move(rest.work), done});
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
    // Handed out as a Future (expose_completion): a quiet rest, or one left to its waiter, must
    // not wait for a waiter that may never come through wait_completion.
    nudge = [queue = weak_from_this(), key = done.get()] {
      if (auto alive = queue.lock()) {
        alive->hurry(key);
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

void TaskQueue::hurry(const c10::ivalue::Future* done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Task& task : tasks_) {
      if (task.done.get() == done) {
        task.waiter_until = {};
      }
    }
  }
  ready_.notify_all();
}

TaskQueue::Clock::time_point TaskQueue::front_left_until() const {
  if (stop_ || tasks_.empty()) {
    return {};
  }
  for (const Task& task : tasks_) {
    if (task.waiter_until == Clock::time_point{}) {
      return {};  // a collective for anyone behind it: the thread must get there
    }
  }
  return tasks_.front().waiter_until;
}

void TaskQueue::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (!running_ && !tasks_.empty()) {
      const Clock::time_point left_until = front_left_until();
      if (left_until <= Clock::now()) {
        run_front(lock);
        continue;
      }
      timed_sleep_ = true;
      ready_.wait_until(lock, left_until);
      timed_sleep_ = false;
      continue;
    }
    if (stop_ && !running_) {
      return;  // drained
    }
    // Idle, or a waiter runs a collective. While collectives left to their waiters keep coming,
    // look again when the latest one's grace would end: they then need no wake-up each.
    const Clock::time_point recent = last_for_waiter_ + grace_;
    if (!stop_ && recent > Clock::now()) {
      timed_sleep_ = true;
      ready_.wait_until(lock, recent);
      timed_sleep_ = false;
    } else {
      ready_.wait(lock);
    }
  }
}

void TaskQueue::run_if_next(const c10::ivalue::Future* done) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto queued = [&] {
    return std::any_of(tasks_.begin(), tasks_.end(),
                       [&](const Task& task) { return task.done.get() == done; });
  };
  bool ran = false;
  // Collectives left to their waiters ahead of this one run here first: this waiter would block
  // on them, and theirs may come later or never (waited in reverse order).
  while (!running_ && !tasks_.empty()) {
    const Task& front = tasks_.front();
    const bool mine = front.done.get() == done;
    if (!mine && (front.waiter_until == Clock::time_point{} || !queued())) {
      break;
    }
    run_front(lock);
    ran = true;
    if (mine) {
      break;
    }
  }
  if (ran) {
    const bool wake = waits_for_running();
    lock.unlock();
    if (wake) {
      ready_.notify_all();
    }
  }
}

void TaskQueue::run_front(std::unique_lock<std::mutex>& lock) {
  Task task = std::move(tasks_.front());
  tasks_.pop_front();
  auto& work = task.work;
  auto& done = task.done;
  running_ = true;
  lock.unlock();
  run_then_complete(work, done);
  lock.lock();
  running_ = false;
}

}  // namespace c10d_func
