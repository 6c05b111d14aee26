#pragma once
// HostBlockCache: private host memory that CPU collectives reuse call after call, for the outputs
// and input snapshots of transports without symmetric memory (Gloo, the hosts' link, and the shm
// transport when its pool is full or turned off).
//
// Why: a fresh large tensor is fresh pages. The kernel faults and zeroes each one on first touch
// and unmaps them when the tensor dies, call after call, and torch's CPU allocator caches
// nothing. A functional all_to_all on Gloo needs two such buffers per call: its output, and the
// snapshot of its input that lets the caller write the input as soon as the op returns. Before
// this cache that took it to 1.4-1.6x torch funcol's time on the same Gloo group at 8-32 MiB.
//
// A block's size is rounded up to a class (block_size_class) and its pages are faulted in once,
// when the block is made. A block freed by its tensor goes to a free list and serves the next
// request of its class. The free blocks kept stay under a bound
// (C10D_FUNC_HOST_CACHE_BYTES, 256 MiB per process by default, 0 turns the cache off); the least
// recently freed go back to the kernel first. Requests under kMinCachedBytes go to torch's
// allocator: malloc serves those from its heap without fresh pages.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace c10d_func {

// `bytes` rounded up to whole pages.
size_t round_up_to_page(size_t bytes);

// Sizes are rounded to classes so that a freed block serves the next request of about its size:
// powers of two up to 1 MiB, then eighths of a power of two (at most 12.5% unused). Shared with
// the shm transport's symmetric pool.
size_t block_size_class(size_t bytes);

// A byte count from environment variable `name`, or `default_bytes` when it is unset or empty;
// anything but a non-negative integer raises, naming the variable and what 0 means (`zero_means`).
size_t bytes_from_environment(const char* name, size_t default_bytes, const char* zero_means);

// A contiguous CPU tensor of `sizes` and `dtype` over `bytes` at `address`, which `release`
// gives back with `context` when the storage dies. Resizable as any CPU tensor's storage: growing
// it moves the data to ordinary memory (and gives the block back), so code that resizes an output
// works as with torch's collectives.
at::Tensor tensor_over_block(void* address, size_t bytes, void* context, c10::DeleterFnPtr release,
                             at::IntArrayRef sizes, caffe2::TypeMeta dtype);

struct HostCacheStats {
  int64_t cached_bytes = 0;  // free blocks kept for reuse
  int64_t in_use_bytes = 0;  // blocks held by live tensors
  int64_t allocations = 0;   // requests served by the cache
  int64_t reuses = 0;        // of those, served by a free block (no page fault)
};

class HostBlockCache : public std::enable_shared_from_this<HostBlockCache> {
 public:
  static constexpr size_t kMinCachedBytes = size_t{128} << 10;

  // `bound_bytes`: the most free blocks kept; 0 serves nothing (allocate returns nullopt).
  explicit HostBlockCache(size_t bound_bytes);
  ~HostBlockCache();
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // A contiguous CPU tensor of `sizes` in a block of the cache, or nullopt when the cache does not
  // serve the request (not CPU, under kMinCachedBytes, the cache off, or no memory to map).
  std::optional<at::Tensor> allocate(at::IntArrayRef sizes, const at::TensorOptions& options);

  HostCacheStats stats() const;

 private:
  struct Block;
  struct FreeBlock {
    void* address;
    size_t capacity;
  };
  static void release_block(void* context);
  void release(void* address, size_t capacity);

  const size_t bound_bytes_;
  mutable std::mutex mutex_;
  std::vector<FreeBlock> free_;  // least recently freed first
  HostCacheStats stats_;
};

// The process's cache (bound from C10D_FUNC_HOST_CACHE_BYTES, read once); never destroyed, since
// tensors in its blocks may die during exit.
HostBlockCache& process_host_cache();

// `at::empty(sizes, options)`, from the process's cache where it serves the request.
at::Tensor private_host_tensor(at::IntArrayRef sizes, const at::TensorOptions& options);

// A private contiguous copy of `input`, in the process's cache where it serves the request.
at::Tensor private_host_copy(const at::Tensor& input);

}  // namespace c10d_func
