// The pending-work table; see pending_work.h.
#include "ops/pending_work.h"

#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace c10d_func {
namespace {

struct Entry {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  PendingCollective pending;
};

class PendingTable {
 public:
  void record(const at::Tensor& output, PendingCollective pending) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Sweep outputs dropped without a wait, amortised over many records.
    if (++records_since_sweep_ >= kSweepEvery) {
      records_since_sweep_ = 0;
      for (auto it = entries_.begin(); it != entries_.end();) {
        it = it->second.storage.expired() ? entries_.erase(it) : std::next(it);
      }
    }
    auto* key = output.storage().unsafeGetStorageImpl();
    entries_.insert_or_assign(
        key, Entry{c10::weak_intrusive_ptr<c10::StorageImpl>(output.storage().getWeakStorageImpl()),
                   std::move(pending)});
  }

  std::optional<PendingCollective> take(const at::Tensor& tensor) {
    if (!tensor.has_storage()) {
      return std::nullopt;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(tensor.storage().unsafeGetStorageImpl());
    if (it == entries_.end()) {
      return std::nullopt;
    }
    PendingCollective pending = std::move(it->second.pending);
    entries_.erase(it);
    return pending;
  }

  std::vector<PendingCollective> take_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<PendingCollective> all;
    for (auto& [key, entry] : entries_) {
      all.push_back(std::move(entry.pending));
    }
    entries_.clear();
    return all;
  }

  int64_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.storage.expired() ? entries_.erase(it) : std::next(it);
    }
    return static_cast<int64_t>(entries_.size());
  }

 private:
  static constexpr int kSweepEvery = 64;
  std::mutex mutex_;
  std::unordered_map<const c10::StorageImpl*, Entry> entries_;
  int records_since_sweep_ = 0;
};

PendingTable& table() {
  // Never destroyed: pending collectives may still complete on transport threads during exit.
  static auto* instance = new PendingTable();
  return *instance;
}

} // namespace

void record_pending(const at::Tensor& output, PendingCollective pending) {
  table().record(output, std::move(pending));
}

void wait_pending(const at::Tensor& tensor) {
  auto pending = table().take(tensor);
  if (!pending) {
    return;
  }
  // CPU: blocks until the collective is done. CUDA: the completion is already marked done, and
  // wait() makes the current stream wait on the collective's event; the host does not block.
  pending->completion->wait();
  Communicator& communicator = *pending->group->communicator;
  std::optional<std::string> reason;
  if (pending->completion->hasError()) {
    reason = pending->completion->tryRetrieveErrorMessage();
    communicator.mark_failed("c10d_func." + std::string(pending->op) + " failed: " + *reason);
  } else if (communicator.failed()) {
    // CUDA transports complete at enqueue and report later failures (the watchdog's abort, an
    // asynchronous NCCL error) through their communicator.
    reason = communicator.failure();
  }
  if (reason) {
    // A transport may have named the op and the group itself (shm does).
    const std::string named = "c10d_func." + std::string(pending->op) + " failed on group (";
    TORCH_CHECK(false, reason->rfind(named, 0) == 0 ? "" : named + pending->group->describe() + "): ",
                *reason,
                "\n(a member may have skipped this call, called collectives in another order, or ",
                "died; the timeout is C10D_FUNC_TIMEOUT seconds)");
  }
}

int64_t pending_count() {
  return table().size();
}

ExitReport settle_at_exit(std::chrono::milliseconds budget) {
  ExitReport report;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (auto& pending : table().take_all()) {
    ++report.unwaited;
    while (!pending.completion->completed() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!pending.completion->completed()) {
      ++report.abandoned;
    }
  }
  return report;
}

void drain_pending() {
  for (auto& pending : table().take_all()) {
    pending.completion->wait();
  }
}

} // namespace c10d_func
