// See host_block_cache.h.
#include "transports/host_block_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it and fault on first touch
#endif

namespace c10d_func {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kDefaultBoundBytes = size_t{256} << 20;

size_t round_up_to(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

}  // namespace

size_t bytes_from_environment(const char* name, size_t default_bytes, const char* zero_means) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return default_bytes;
  }
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  TORCH_CHECK(end != value && *end == '\0' && parsed >= 0, "c10d_func: ", name,
              " must be a number of bytes (0 ", zero_means, "), got '", value, "'");
  return static_cast<size_t>(parsed);
}

at::Tensor tensor_over_block(void* address, size_t bytes, void* context, c10::DeleterFnPtr release,
                             at::IntArrayRef sizes, caffe2::TypeMeta dtype) {
  c10::DataPtr data(address, context, release, c10::Device(c10::kCPU));
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(data),
                       c10::GetAllocator(c10::kCPU), /*resizable=*/true);
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return tensor;
}

size_t round_up_to_page(size_t bytes) {
  return round_up_to(bytes, kPage);
}

size_t block_size_class(size_t bytes) {
  size_t capacity = round_up_to_page(std::max<size_t>(bytes, 1));
  if (capacity <= (size_t{1} << 20)) {
    size_t power = kPage;
    while (power < capacity) {
      power <<= 1;
    }
    return power;
  }
  size_t power = size_t{1} << 20;
  while (power * 2 <= capacity) {
    power <<= 1;
  }
  return round_up_to(capacity, power / 8);
}

struct HostBlockCache::Block {
  std::shared_ptr<HostBlockCache> cache;
  void* address;
  size_t capacity;
};

HostBlockCache::HostBlockCache(size_t bound_bytes) : bound_bytes_(bound_bytes) {}

HostBlockCache::~HostBlockCache() {
  // Every block's tensor has died (each holds the cache): give the free blocks back.
  for (const FreeBlock& block : free_) {
    ::munmap(block.address, block.capacity);
  }
}

void HostBlockCache::release_block(void* context) {
  std::unique_ptr<Block> block(static_cast<Block*>(context));
  block->cache->release(block->address, block->capacity);
}

std::optional<at::Tensor> HostBlockCache::allocate(at::IntArrayRef sizes,
                                                   const at::TensorOptions& options) {
  if (bound_bytes_ == 0 || !options.device().is_cpu() || options.layout() != at::kStrided ||
      options.pinned_memory() ||
      options.memory_format_opt().value_or(at::MemoryFormat::Contiguous) !=
          at::MemoryFormat::Contiguous) {
    return std::nullopt;
  }
  const size_t bytes =
      static_cast<size_t>(c10::multiply_integers(sizes)) * options.dtype().itemsize();
  if (bytes < kMinCachedBytes) {
    return std::nullopt;
  }
  const size_t capacity = block_size_class(bytes);
  void* address = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The most recently freed block of this class: the likeliest still in the CPU's caches.
    auto found = std::find_if(free_.rbegin(), free_.rend(),
                              [&](const FreeBlock& block) { return block.capacity == capacity; });
    if (found != free_.rend()) {
      address = found->address;
      free_.erase(std::next(found).base());
      stats_.cached_bytes -= static_cast<int64_t>(capacity);
      ++stats_.reuses;
    }
  }
  if (address == nullptr) {
    address = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) {
      return std::nullopt;  // torch's allocator then reports what is missing
    }
    // All pages at once, in one call, instead of one fault per page as the data lands.
    (void)::madvise(address, capacity, MADV_POPULATE_WRITE);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.allocations;
    stats_.in_use_bytes += static_cast<int64_t>(capacity);
  }
  auto* block = new Block{shared_from_this(), address, capacity};
  return tensor_over_block(address, bytes, block, &HostBlockCache::release_block, sizes,
                           options.dtype());
}

void HostBlockCache::release(void* address, size_t capacity) {
  std::vector<FreeBlock> unmapped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use_bytes -= static_cast<int64_t>(capacity);
    if (capacity > bound_bytes_) {
      unmapped.push_back({address, capacity});
    } else {
      // The block just freed is the likeliest to be asked for again (a loop's next output): the
      // least recently freed make room for it.
      while (static_cast<size_t>(stats_.cached_bytes) + capacity > bound_bytes_) {
        unmapped.push_back(free_.front());
        stats_.cached_bytes -= static_cast<int64_t>(free_.front().capacity);
        free_.erase(free_.begin());
      }
      free_.push_back({address, capacity});
      stats_.cached_bytes += static_cast<int64_t>(capacity);
    }
  }
  for (const FreeBlock& block : unmapped) {  // outside the lock: munmap of a large block is slow
    ::munmap(block.address, block.capacity);
  }
}

HostCacheStats HostBlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

HostBlockCache& process_host_cache() {
  static auto* cache = new std::shared_ptr<HostBlockCache>(std::make_shared<HostBlockCache>(
      bytes_from_environment("C10D_FUNC_HOST_CACHE_BYTES", kDefaultBoundBytes,
                             "turns the cache of private host memory off")));
  return **cache;
}

at::Tensor private_host_tensor(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (auto tensor = process_host_cache().allocate(sizes, options)) {
    return *tensor;
  }
  return at::empty(sizes, options);
}

at::Tensor private_host_copy(const at::Tensor& input) {
  if (auto copy = process_host_cache().allocate(input.sizes(), input.options())) {
    if (input.is_contiguous()) {
      std::memcpy(copy->data_ptr(), input.data_ptr(), input.nbytes());
    } else {
      copy->copy_(input);
    }
    return *copy;
  }
  return input.clone(at::MemoryFormat::Contiguous);
}

}  // namespace c10d_func
