#pragma once
// SymmetricPool: this member's share of a communicator's symmetric host memory.
//
// The shm segment ends with one region per member (C10D_FUNC_SHM_POOL_BYTES each, sparse: pages
// exist only once reserved). Every member maps the whole segment, so a tensor placed in any
// member's region can be read and written by every member in place: collectives on such tensors
// move each byte once instead of through staging slots, and outputs placed there need no copy
// out. Each member allocates only from its own region, here, with a caching allocator:
//
// - a block's pages are reserved once (fallocate, so an over-full /dev/shm is an allocation that
//   falls back, not a SIGBUS) and pre-faulted (MADV_POPULATE_WRITE), then kept: a block freed by
//   its tensor's storage goes to a free list by size and serves the next request of that size
//   without a page fault (the process keeps up to half the bound so, over all its pools;
//   beyond, freed blocks go back to the kernel at once);
// - the bytes reserved by every pool of the process together stay under C10D_FUNC_SHM_POOL_BYTES
//   (default 1 GiB); when a request does not fit, this pool's cached blocks are given back to the
//   kernel (hole punched) and the request retried; when it still does not fit, allocate() returns
//   nothing and the caller uses ordinary memory (counted: stats().fallbacks);
// - a block keeps the segment mapped (it holds the pool, the pool holds the mapping), so a tensor
//   outlives the communicator, shutdown() and the other members.
#include <ATen/core/Tensor.h>

#include "transports/shm/shm_segment.h"

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace c10d_func::shm {

// The process-wide bound on reserved symmetric memory (C10D_FUNC_SHM_POOL_BYTES); also the size
// of each member's region, so one pool may use all of it.
size_t pool_bound_bytes();

struct PoolStats {
  int64_t reserved_bytes = 0;  // reserved by this pool: in use + cached
  int64_t in_use_bytes = 0;
  int64_t allocations = 0;  // served from the pool
  int64_t reuses = 0;       // of those, served from a cached block (no page fault)
  int64_t fallbacks = 0;    // requests that went to ordinary memory: the bound or /dev/shm full
};

class SymmetricPool : public std::enable_shared_from_this<SymmetricPool> {
 public:
  SymmetricPool(std::shared_ptr<SharedSegment> segment, size_t region_offset, size_t region_bytes);
  ~SymmetricPool();

  // A contiguous tensor in this member's region, or nullopt (counted as a fallback) when the
  // bound or /dev/shm leaves no room. `user_owned` marks tensors a user asked for
  // (c10d_func.empty): collectives read those in place without a private copy.
  std::optional<at::Tensor> allocate(at::IntArrayRef sizes, const at::TensorOptions& options,
                                     bool user_owned);

  // The segment offset of `tensor`'s data when all of it lies in the segment (any member's
  // region), so every member can address it.
  std::optional<size_t> offset_in_segment(const at::Tensor& tensor) const;
  // True for tensors from allocate(..., user_owned=true) of this pool.
  bool is_user_owned(const at::Tensor& tensor) const;

  char* base() const { return segment_->base(); }
  PoolStats stats() const;

 private:
  struct Block;
  static void release_block(void* context);

  std::optional<size_t> reserve(size_t capacity);  // a fresh block's offset; lock held
  void release(size_t offset, size_t capacity);
  void trim_cache();  // gives every cached block back to the kernel; lock held
  void unreserve(size_t offset, size_t capacity);  // one block back to the kernel; lock held

  std::shared_ptr<SharedSegment> segment_;
  size_t region_offset_;
  size_t region_bytes_;

  mutable std::mutex mutex_;
  std::map<size_t, size_t> unreserved_;  // offset -> length, coalesced
  struct CachedBlock {
    size_t offset;
    size_t capacity;
  };
  std::vector<CachedBlock> cached_;  // free blocks kept for reuse, least recently freed first
  size_t cached_bytes_ = 0;
  PoolStats stats_;
};

}  // namespace c10d_func::shm
