// Pending work shared with torch's work registry; see pending_work.h.
#include "runtime/pending_work.h"

#include <ATen/record_function.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace c10d_func {
namespace {

// torch keeps one work registry per forward thread (c10d::RankLocal: an autograd thread uses the
// registry of the thread that ran the forward). A Work can be unregistered only from the thread
// that owns its registry, so each entry remembers that owner, computed as RankLocal does.
uint64_t registry_owner() {
  const auto node = torch::autograd::get_current_node();
  return node == nullptr ? at::RecordFunction::currentThreadId() : node->thread_id();
}

// Waits `pending` and raises, naming op and group, if its collective failed.
void wait_and_check(const PendingCollective& pending) {
  // CPU: blocks until the collective is done. CUDA: the completion is already marked done, and
  // wait() makes the current stream wait on the collective's event; the host does not block.
  wait_completion(pending.completion);
  // Messages (isend, irecv) run on channels of their own, without the group's communicator.
  Communicator* communicator = pending.group->communicator.get();
  std::optional<std::string> reason;
  if (pending.completion->hasError()) {
    reason = pending.completion->tryRetrieveErrorMessage();
    if (communicator != nullptr) {
      communicator->mark_failed("c10d_func." + std::string(pending.op) + " failed: " + *reason);
    }
  } else if (communicator != nullptr && communicator->failed()) {
    // CUDA transports complete at enqueue and report later failures (the watchdog's abort, an
    // asynchronous NCCL error) through their communicator.
    reason = communicator->failure();
  }
  if (reason) {
    // A transport may have named the op and the group itself (shm does).
    const std::string named = "c10d_func." + std::string(pending.op) + " failed on group (";
    TORCH_CHECK(
        false,
        reason->rfind(named, 0) == 0 ? "" : named + pending.group->describe() + "): ", *reason,
        "\n(a member may have skipped this call, called collectives in another order, or ",
        "died; the timeout is C10D_FUNC_TIMEOUT seconds)");
  }
}

class PendingTable;
PendingTable& table();

// One c10d_func collective as torch sees it. torch's wait_tensor pops it from its registry and
// calls wait() once; c10d_func's wait_tensor goes through the same registry.
class PendingWork final : public c10d::Work {
 public:
  PendingWork(PendingCollective pending, const c10::StorageImpl* key)
      : pending_(std::move(pending)), key_(key) {}

  bool isCompleted() override { return pending_.completion->completed(); }

  bool isSuccess() const override {
    return pending_.completion->completed() && !pending_.completion->hasError();
  }

  // The group's timeout, which the transport enforces, bounds the wait; `timeout` is not used.
  bool wait(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    expose_completion(pending_.completion);  // may be waited directly: nothing left to a waiter
    return pending_.completion;
  }

  const Completion& completion() const { return pending_.completion; }

 private:
  PendingCollective pending_;
  const c10::StorageImpl* key_;  // identity only, never dereferenced
};

struct Entry {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  c10::intrusive_ptr<PendingWork> work;
  uint64_t owner;
};

class PendingTable {
 public:
  void record(const at::Tensor& output, const c10::intrusive_ptr<PendingWork>& work) {
    const uint64_t owner = registry_owner();
    std::vector<c10::intrusive_ptr<PendingWork>> swept;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Sweep outputs dropped without a wait, amortised over many records.
      if (++records_since_sweep_ >= kSweepEvery) {
        records_since_sweep_ = 0;
        swept = sweep_locked(owner);
      }
      entries_.emplace(output.storage().unsafeGetStorageImpl(),
                       Entry{output.storage().getWeakStorageImpl(), work, owner});
    }
    forget_in_torch(swept);
  }

  // Drops the entry of `work` (waited: it needs no draining any more).
  void forget(const c10::StorageImpl* key, const PendingWork* work) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [begin, end] = entries_.equal_range(key);
    for (auto it = begin; it != end; ++it) {
      if (it->second.work.get() == work) {
        entries_.erase(it);
        return;
      }
    }
  }

  std::vector<Entry> take_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry> all;
    all.reserve(entries_.size());
    for (auto& [key, entry] : entries_) {
      all.push_back(std::move(entry));
    }
    entries_.clear();
    return all;
  }

  int64_t size() {
    std::vector<c10::intrusive_ptr<PendingWork>> swept;
    int64_t live = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      swept = sweep_locked(registry_owner());
      for (const auto& [key, entry] : entries_) {
        live += entry.storage.expired() ? 0 : 1;
      }
    }
    forget_in_torch(swept);
    return live;
  }

  // Removes works from torch's registry (of the calling thread), outside our lock: torch's
  // registry takes its own.
  static void forget_in_torch(const std::vector<c10::intrusive_ptr<PendingWork>>& works);

 private:
  // Entries of this owner whose output died without a wait. Other owners' entries wait for their
  // own thread's sweep, since only it can reach their registry.
  std::vector<c10::intrusive_ptr<PendingWork>> sweep_locked(uint64_t owner) {
    std::vector<c10::intrusive_ptr<PendingWork>> swept;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.owner == owner && it->second.storage.expired()) {
        swept.push_back(std::move(it->second.work));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    return swept;
  }

  static constexpr int kSweepEvery = 64;
  std::mutex mutex_;
  std::unordered_multimap<const c10::StorageImpl*, Entry> entries_;
  int records_since_sweep_ = 0;
};

PendingTable& table() {
  // Never destroyed: pending collectives may still complete on transport threads during exit.
  static auto* instance = new PendingTable();
  return *instance;
}

bool PendingWork::wait(std::chrono::milliseconds /*timeout*/) {
  table().forget(key_, this);
  wait_and_check(pending_);
  return true;
}

void PendingTable::forget_in_torch(const std::vector<c10::intrusive_ptr<PendingWork>>& works) {
  for (const auto& work : works) {
    c10d::unregister_work(work);
  }
}

}  // namespace

void record_pending(const at::Tensor& output, PendingCollective pending) {
  auto work =
      c10::make_intrusive<PendingWork>(std::move(pending), output.storage().unsafeGetStorageImpl());
  c10d::register_work(output, work);
  table().record(output, work);
}

void wait_pending(const at::Tensor& tensor) {
  if (tensor.has_storage()) {
    c10d::wait_tensor(tensor);
  }
}

int64_t pending_count() {
  return table().size();
}

namespace {

// Unregisters from torch's registry the works of `entries` that the calling thread's registry
// holds: settled or drained here, they would be reported again as unwaited when torch's
// registry is destroyed at exit.
void forget_taken(std::vector<Entry>& entries) {
  const uint64_t owner = registry_owner();
  std::vector<c10::intrusive_ptr<PendingWork>> mine;
  for (auto& entry : entries) {
    if (entry.owner == owner) {
      mine.push_back(std::move(entry.work));
    }
  }
  PendingTable::forget_in_torch(mine);
}

}  // namespace

ExitReport settle_at_exit(std::chrono::milliseconds budget) {
  ExitReport report;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  auto entries = table().take_all();
  for (auto& entry : entries) {
    const Completion& completion = entry.work->completion();
    ++report.unwaited;
    // A deferred wait runs the collective in this thread, bounded by its group's timeout only:
    // once the budget is spent, the others are abandoned rather than run one after another.
    if (std::chrono::steady_clock::now() < deadline) {
      run_deferred_wait(completion);
    }
    while (!completion->completed() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!completion->completed()) {
      ++report.abandoned;
    }
  }
  forget_taken(entries);
  return report;
}

void drain_pending() {
  auto entries = table().take_all();
  for (auto& entry : entries) {
    wait_completion(entry.work->completion());
  }
  forget_taken(entries);
}

}  // namespace c10d_func
