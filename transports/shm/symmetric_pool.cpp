// See symmetric_pool.h.
#include "transports/shm/symmetric_pool.h"
#include "transports/host_block_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace c10d_func::shm {
namespace {

constexpr size_t kDefaultPoolBytes = size_t{1} << 30;

// Reserved bytes of every pool of this process, against pool_bound_bytes(), and of those the
// cached ones (free blocks kept for reuse), against half of it.
std::atomic<size_t> reserved_in_process{0};
std::atomic<size_t> cached_in_process{0};

}  // namespace

size_t pool_bound_bytes() {
  static const size_t bound = round_up_to_page(bytes_from_environment(
      "C10D_FUNC_SHM_POOL_BYTES", kDefaultPoolBytes, "turns symmetric memory off"));
  return bound;
}

struct SymmetricPool::Block {
  std::shared_ptr<SymmetricPool> pool;
  size_t offset;
  size_t capacity;
  bool user_owned;
};

SymmetricPool::SymmetricPool(std::shared_ptr<SharedSegment> segment, size_t region_offset,
                             size_t region_bytes)
    : segment_(std::move(segment)), region_offset_(region_offset), region_bytes_(region_bytes) {
  if (region_bytes_ > 0) {
    unreserved_[region_offset_] = region_bytes_;
  }
}

SymmetricPool::~SymmetricPool() {
  // Every block's tensor has died (each holds the pool): give the cached pages back.
  std::lock_guard<std::mutex> lock(mutex_);
  trim_cache();
}

void SymmetricPool::release_block(void* context) {
  std::unique_ptr<Block> block(static_cast<Block*>(context));
  block->pool->release(block->offset, block->capacity);
}

std::optional<at::Tensor> SymmetricPool::allocate(at::IntArrayRef sizes,
                                                  const at::TensorOptions& options,
                                                  bool user_owned) {
  int64_t numel = 1;
  for (const int64_t size : sizes) {
    numel *= size;
  }
  const size_t bytes =
      static_cast<size_t>(numel) * c10::elementSize(options.dtype().toScalarType());
  const size_t capacity = block_size_class(bytes);
  std::optional<size_t> offset;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The most recently freed block of this size class: the likeliest still in cache.
    auto cached = std::find_if(cached_.rbegin(), cached_.rend(), [&](const CachedBlock& block) {
      return block.capacity == capacity;
    });
    if (cached != cached_.rend()) {
      offset = cached->offset;
      cached_.erase(std::next(cached).base());
      cached_bytes_ -= capacity;
      cached_in_process.fetch_sub(capacity);
      ++stats_.reuses;
    } else {
      offset = reserve(capacity);
      if (!offset && !cached_.empty()) {
        trim_cache();
        offset = reserve(capacity);
      }
    }
    if (!offset) {
      ++stats_.fallbacks;
      return std::nullopt;
    }
    ++stats_.allocations;
    stats_.in_use_bytes += static_cast<int64_t>(capacity);
  }
  auto* block = new Block{shared_from_this(), *offset, capacity, user_owned};
  return tensor_over_block(segment_->base() + *offset, bytes, block, &SymmetricPool::release_block,
                           sizes, options.dtype());
}

std::optional<size_t> SymmetricPool::reserve(size_t capacity) {
  const size_t bound = pool_bound_bytes();
  size_t before = reserved_in_process.load();
  do {
    if (before + capacity > bound) {
      return std::nullopt;
    }
  } while (!reserved_in_process.compare_exchange_weak(before, before + capacity));
  for (auto it = unreserved_.begin(); it != unreserved_.end(); ++it) {
    if (it->second < capacity) {
      continue;
    }
    const size_t offset = it->first;
    const size_t rest = it->second - capacity;
    unreserved_.erase(it);
    if (rest > 0) {
      unreserved_[offset + capacity] = rest;
    }
    if (segment_->reserve(offset, capacity)) {
      stats_.reserved_bytes += static_cast<int64_t>(capacity);
      return offset;
    }
    // /dev/shm is full: put the range back and let the caller fall back.
    segment_->give_back(offset, capacity);
    unreserved_[offset] = capacity;
    break;
  }
  reserved_in_process.fetch_sub(capacity);
  return std::nullopt;
}

void SymmetricPool::release(size_t offset, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes -= static_cast<int64_t>(capacity);
  // Cached blocks are shared memory nobody uses: all pools of the process together keep at most
  // half the bound of them, so the rest of the bound is always there for tensors in use
  // (whichever pool asks) and many processes on one host do not each sit on a full pool. Half,
  // not less: a 4-rank all_gather of 64 MiB frees a 256 MiB output every call.
  // The block just freed is the likeliest to be asked for again (a loop's next output): this
  // pool's least recently freed blocks make room for it first.
  const size_t cap = pool_bound_bytes() / 2;
  while (cached_in_process.load() + capacity > cap && !cached_.empty()) {
    const CachedBlock oldest = cached_.front();
    cached_.erase(cached_.begin());
    cached_bytes_ -= oldest.capacity;
    cached_in_process.fetch_sub(oldest.capacity);
    unreserve(oldest.offset, oldest.capacity);
  }
  if (cached_in_process.fetch_add(capacity) + capacity > cap) {
    cached_in_process.fetch_sub(capacity);
    unreserve(offset, capacity);
    return;
  }
  cached_bytes_ += capacity;
  cached_.push_back({offset, capacity});
}

void SymmetricPool::trim_cache() {
  for (const CachedBlock& block : cached_) {
    unreserve(block.offset, block.capacity);
  }
  cached_.clear();
  cached_in_process.fetch_sub(cached_bytes_);
  cached_bytes_ = 0;
}

void SymmetricPool::unreserve(size_t offset, size_t capacity) {
  segment_->give_back(offset, capacity);
  reserved_in_process.fetch_sub(capacity);
  stats_.reserved_bytes -= static_cast<int64_t>(capacity);
  // Coalesce with the free neighbours so large requests find room again.
  size_t start = offset;
  size_t length = capacity;
  auto next = unreserved_.lower_bound(start);
  if (next != unreserved_.end() && next->first == start + length) {
    length += next->second;
    next = unreserved_.erase(next);
  }
  if (next != unreserved_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      length += previous->second;
      unreserved_.erase(previous);
    }
  }
  unreserved_[start] = length;
}

std::optional<size_t> SymmetricPool::offset_in_segment(const at::Tensor& tensor) const {
  const auto* data = static_cast<const char*>(tensor.data_ptr());
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  const char* begin = segment_->base();
  if (data < begin || data + bytes > begin + segment_->size()) {
    return std::nullopt;
  }
  return static_cast<size_t>(data - begin);
}

bool SymmetricPool::is_user_owned(const at::Tensor& tensor) const {
  const auto& data = tensor.storage().data_ptr();
  if (data.get_deleter() != &SymmetricPool::release_block) {
    return false;
  }
  const auto* block = static_cast<const Block*>(data.get_context());
  return block->user_owned && block->pool.get() == this;
}

PoolStats SymmetricPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace c10d_func::shm
