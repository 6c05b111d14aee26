// Completions and their helpers; see completion.h.
#include "transports/completion.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace c10d_func {
namespace {

struct DeferredWait {
  std::once_flag once;
  std::function<void()> wait;
  // What `wait` completes; chained Completions follow it. Unset for a helper
  // (help_when_waited), which need not complete anything.
  Completion target;
  // help_when_waited's nudge: run when the Completion is handed out as a Future.
  std::function<void()> nudge;

  void run() {
    std::call_once(once, [this] {
      std::function<void()> to_run = std::move(wait);
      wait = nullptr;
      if (!target) {
        to_run();
        return;
      }
      try {
        to_run();
        to_run = nullptr;  // drops what the wait held (a Python Work) before waiters resume
        target->markCompleted(c10::IValue());
      } catch (...) {
        to_run = nullptr;
        target->setError(std::current_exception());
      }
    });
  }
};

// Completions with a deferred wait behind them: Python groups' future-less Works, and the
// hierarchy's collectives (a few per millisecond at most, each costing far more than a lock), so
// one table with a lock; an atomic count keeps every other wait off the lock. An entry goes when
// its Completion is waited, or is swept once the Completion is gone (its output dropped unwaited).
class DeferredWaits {
 public:
  void add(const Completion& completion, std::shared_ptr<DeferredWait> deferred) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (++adds_since_sweep_ >= kSweepEvery) {
      adds_since_sweep_ = 0;
      for (auto it = entries_.begin(); it != entries_.end();) {
        it = it->second.first.expired() ? entries_.erase(it) : std::next(it);
      }
    }
    entries_.insert_or_assign(
        completion.get(), std::make_pair(c10::weak_intrusive_ptr<c10::ivalue::Future>(completion),
                                         std::move(deferred)));
    count_.store(entries_.size(), std::memory_order_release);
  }

  std::shared_ptr<DeferredWait> find(const Completion& completion, bool take) {
    if (count_.load(std::memory_order_acquire) == 0) {
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(completion.get());
    if (it == entries_.end()) {
      return nullptr;
    }
    // An address is reused once its Future is gone: the entry is that Future's only if the weak
    // reference still leads to it.
    std::shared_ptr<DeferredWait> deferred;
    if (it->second.first.lock().get() == completion.get()) {
      deferred = it->second.second;
    }
    if (take || !deferred) {
      entries_.erase(it);
      count_.store(entries_.size(), std::memory_order_release);
    }
    return deferred;
  }

 private:
  static constexpr int kSweepEvery = 64;
  std::mutex mutex_;
  std::unordered_map<
      const c10::ivalue::Future*,
      std::pair<c10::weak_intrusive_ptr<c10::ivalue::Future>, std::shared_ptr<DeferredWait>>>
      entries_;
  std::atomic<size_t> count_{0};
  int adds_since_sweep_ = 0;
};

DeferredWaits& deferred_waits() {
  static auto* instance = new DeferredWaits();  // never destroyed: waits may run during exit
  return *instance;
}

}  // namespace

Completion completed_when_waited(std::function<void()> wait) {
  auto deferred = std::make_shared<DeferredWait>();
  deferred->wait = std::move(wait);
  deferred->target = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  Completion completion = deferred->target;
  deferred_waits().add(completion, std::move(deferred));
  return completion;
}

void help_when_waited(const Completion& completion, std::function<void()> help,
                      std::function<void()> nudge) {
  auto deferred = std::make_shared<DeferredWait>();
  deferred->wait = std::move(help);  // no target: the entry must not keep its key alive
  deferred->nudge = std::move(nudge);
  deferred_waits().add(completion, std::move(deferred));
}

void expose_completion(const Completion& completion) {
  if (auto deferred = deferred_waits().find(completion, /*take=*/false)) {
    if (deferred->nudge) {
      deferred->nudge();
    }
  }
}

void chain_deferred_wait(const Completion& upstream, const Completion& downstream) {
  if (upstream.get() == downstream.get()) {
    return;
  }
  if (auto deferred = deferred_waits().find(upstream, /*take=*/false)) {
    deferred_waits().add(downstream, std::move(deferred));
  }
}

void run_deferred_wait(const Completion& completion) {
  if (auto deferred = deferred_waits().find(completion, /*take=*/true)) {
    deferred->run();
  }
}

void wait_completion(const Completion& completion) {
  run_deferred_wait(completion);
  completion->wait();
}

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
  using Storages = std::vector<c10::ivalue::Future::WeakStorage>;
  Completion child = upstream->then(
      [](c10::ivalue::Future& parent) -> std::tuple<c10::IValue, Storages> {
        (void)parent.value();  // rethrows the collective's error into the child
        // The parent's storages, held weakly: a device Future records its completion events
        // only for the devices of its storages, and a child with none would order no waiter.
        // The callback's streams waited for the parent's events, so the child's come after them.
        return {c10::IValue(), parent.storages()};
      },
      c10::NoneType::get());
  chain_deferred_wait(upstream, child);
  return child;
}

Completion when_all(const std::vector<Completion>& completions) {
  if (completions.empty()) {
    return completed();
  }
  if (completions.size() == 1) {
    return completions.front();
  }
  std::vector<c10::Device> devices;
  for (const auto& completion : completions) {
    for (const c10::Device& device : completion->devices()) {
      if (std::find(devices.begin(), devices.end(), device) == devices.end()) {
        devices.push_back(device);
      }
    }
  }
  struct Tally {
    std::mutex mutex;
    size_t remaining;
    std::exception_ptr first_error;
    std::vector<Completion> parts;  // dropped once all are done (they hold this callback)
  };
  auto tally = std::make_shared<Tally>();
  tally->remaining = completions.size();
  tally->parts = completions;
  auto all = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get(), devices);
  for (const auto& completion : completions) {
    completion->addCallback([tally, all](c10::ivalue::Future& done) {
      std::unique_lock<std::mutex> lock(tally->mutex);
      if (done.hasError() && !tally->first_error) {
        tally->first_error = done.exception_ptr();
      }
      if (--tally->remaining > 0) {
        return;
      }
      auto error = tally->first_error;
      std::vector<Completion> parts = std::move(tally->parts);
      tally->parts.clear();
      lock.unlock();
      if (error) {
        all->setError(error);
        return;
      }
      // Every part is done: waiting each one does not block, it makes this callback's streams
      // wait for the part's events, so the events `all` records on them come after every part.
      std::vector<c10::ivalue::Future::WeakStorage> storages;
      for (const auto& part : parts) {
        part->wait();
        const auto& held = part->storages();
        storages.insert(storages.end(), held.begin(), held.end());
      }
      all->markCompleted(c10::IValue(), std::move(storages));
    });
  }
  // Waiting `all` runs every part's deferred wait, in order (a Completion has one entry:
  // chaining each part to it would keep only the last part's, and the others' would never run).
  // The parts are held weakly: their callbacks hold `all`.
  if (std::any_of(completions.begin(), completions.end(), [](const Completion& part) {
        return deferred_waits().find(part, /*take=*/false) != nullptr;
      })) {
    std::vector<c10::weak_intrusive_ptr<c10::ivalue::Future>> parts(completions.begin(),
                                                                    completions.end());
    const auto each = [parts](void (*step)(const Completion&)) {
      for (const auto& weak : parts) {
        if (Completion part = weak.lock()) {
          step(part);
        }
      }
    };
    help_when_waited(
        all, [each] { each(&run_deferred_wait); }, [each] { each(&expose_completion); });
  }
  return all;
}

namespace {

// `written` and `also_used`, less those on the CPU (which need no stream bookkeeping).
std::vector<at::Tensor> device_tensors(const at::Tensor& written,
                                       const std::vector<at::Tensor>& also_used) {
  std::vector<at::Tensor> kept;
  auto keep = [&kept](const at::Tensor& tensor) {
    if (tensor.defined() && tensor.has_storage() && !tensor.device().is_cpu() &&
        !tensor.is_meta()) {
      kept.push_back(tensor);
    }
  };
  keep(written);
  for (const at::Tensor& tensor : also_used) {
    keep(tensor);
  }
  return kept;
}

// Tells each tensor's allocator that the current stream of its device used it: a caching
// allocator (CUDA's) then holds its block back, once freed, until that stream's work so far is
// done. A finishing step runs on the callback's stream, not the one the tensors were allocated
// on, so without this a buffer it copies from or into could be handed to a new tensor (on the
// allocating stream) while that copy is still queued, and the copy would land in the new tensor.
void mark_used_by_current_streams(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& tensor : tensors) {
    const c10::impl::VirtualGuardImpl guard(tensor.device().type());
    guard.recordDataPtrOnStream(tensor.storage().data_ptr(), guard.getStream(tensor.device()));
  }
}

}  // namespace

Completion then_run(const Completion& upstream, const at::Tensor& written,
                    const std::vector<at::Tensor>& also_used, std::function<void()> finish) {
  if (!finish) {
    return upstream;
  }
  using Storages = std::vector<c10::ivalue::Future::WeakStorage>;
  Completion child = upstream->then(
      [pending = std::make_shared<std::function<void()>>(std::move(finish)),
       used = std::make_shared<std::vector<at::Tensor>>(device_tensors(written, also_used)),
       storage = written.has_storage() ? std::optional<c10::ivalue::Future::WeakStorage>(
                                             written.storage().getWeakStorageImpl())
                                       : std::nullopt](
          c10::ivalue::Future& parent) -> std::tuple<c10::IValue, Storages> {
        // Whatever happens, the tensors `finish` holds are released before the result completes:
        // releasing one that Python still references takes the GIL, which a transport thread
        // must not try to take once the interpreter, told the work is done, may be shutting down.
        std::function<void()> release = std::move(*pending);
        *pending = nullptr;
        std::vector<at::Tensor> in_use = std::move(*used);
        used->clear();
        // value() rethrows the collective's error, so `then` marks the child failed with it.
        (void)parent.value();
        // Finishing writes data only. It runs on a transport thread, after autograd may have
        // wrapped the output it writes, so it must never be recorded by autograd.
        at::AutoDispatchBelowADInplaceOrView below;
        release();
        mark_used_by_current_streams(in_use);
        release = nullptr;
        in_use.clear();
        Storages storages;
        if (storage && !storage->expired()) {
          storages.push_back(*storage);
        }
        return {c10::IValue(), std::move(storages)};
      },
      c10::NoneType::get());
  chain_deferred_wait(upstream, child);
  return child;
}

void run_then_complete(std::function<void()>& work, const Completion& done) {
  std::exception_ptr error;
  try {
    work();
  } catch (const c10::Error& e) {
    error = std::make_exception_ptr(std::runtime_error(e.what_without_backtrace()));
  } catch (...) {
    error = std::current_exception();
  }
  work = nullptr;
  if (error) {
    done->setError(error);
  } else {
    done->markCompleted(c10::IValue());
  }
}

void end_progress_thread(std::thread& worker) {
  if (!worker.joinable()) {
    return;
  }
  if (worker.get_id() == std::this_thread::get_id()) {
    worker.detach();
  } else {
    worker.join();
  }
}

}  // namespace c10d_func
