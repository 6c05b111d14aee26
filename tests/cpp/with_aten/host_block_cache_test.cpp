// The cache of private host memory (transports/host_block_cache.h): a block freed by its tensor
// serves the next request of its size class, from whichever thread it was freed; the free blocks
// kept stay under the bound, the least recently freed leaving first; what it does not serve
// (small, not CPU, the cache off) is left to torch's allocator.
#include "transports/host_block_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>

namespace c10d_func {
namespace {

constexpr int64_t kMiB = 1 << 20;

at::Tensor floats(HostBlockCache& cache, int64_t count) {
  auto tensor = cache.allocate({count}, at::TensorOptions().dtype(at::kFloat));
  EXPECT_TRUE(tensor.has_value()) << count << " floats";
  return tensor.value_or(at::Tensor());
}

TEST(HostBlockCache, SizeClassesRoundUpByAtMostAnEighth) {
  EXPECT_EQ(block_size_class(1), 4096u);
  EXPECT_EQ(block_size_class(128 << 10), 128u << 10);
  EXPECT_EQ(block_size_class((128 << 10) + 1), 256u << 10);
  EXPECT_EQ(block_size_class(kMiB), static_cast<size_t>(kMiB));
  EXPECT_EQ(block_size_class(8 * kMiB + 1), static_cast<size_t>(9 * kMiB));
  for (size_t bytes : {size_t{3} << 20, size_t{33} << 20, (size_t{100} << 20) + 7}) {
    const size_t capacity = block_size_class(bytes);
    EXPECT_GE(capacity, bytes);
    EXPECT_LE(capacity, bytes + bytes / 8 + 4096) << bytes;
  }
}

TEST(HostBlockCache, AFreedBlockServesTheNextRequestOfItsClass) {
  auto cache = std::make_shared<HostBlockCache>(64 * kMiB);
  void* first = nullptr;
  {
    at::Tensor tensor = floats(*cache, kMiB / 4);  // 1 MiB
    EXPECT_TRUE(tensor.is_contiguous());
    EXPECT_EQ(tensor.sizes(), at::IntArrayRef({kMiB / 4}));
    tensor.fill_(3);  // the pages are there and writable
    EXPECT_EQ(tensor.sum().item<double>(), 3.0 * kMiB / 4);
    first = tensor.data_ptr();
    EXPECT_EQ(cache->stats().in_use_bytes, kMiB);
  }
  EXPECT_EQ(cache->stats().in_use_bytes, 0);
  EXPECT_EQ(cache->stats().cached_bytes, kMiB);
  // Another dtype and shape of the same class: the same block.
  auto again = cache->allocate({512, 1024}, at::TensorOptions().dtype(at::kShort));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->data_ptr(), first);
  EXPECT_EQ(again->scalar_type(), at::kShort);
  EXPECT_EQ(again->sizes(), at::IntArrayRef({512, 1024}));
  const HostCacheStats stats = cache->stats();
  EXPECT_EQ(stats.allocations, 2);
  EXPECT_EQ(stats.reuses, 1);
  EXPECT_EQ(stats.cached_bytes, 0);
}

TEST(HostBlockCache, ABlockFreedOnAnotherThreadComesBack) {
  auto cache = std::make_shared<HostBlockCache>(64 * kMiB);
  at::Tensor tensor = floats(*cache, kMiB);
  void* address = tensor.data_ptr();
  std::thread([held = std::move(tensor)]() mutable { held = at::Tensor(); }).join();
  EXPECT_EQ(floats(*cache, kMiB).data_ptr(), address);
}

TEST(HostBlockCache, FreeBlocksStayUnderTheBoundLeastRecentlyFreedFirst) {
  auto cache = std::make_shared<HostBlockCache>(3 * kMiB);
  at::Tensor a = floats(*cache, kMiB / 4);
  at::Tensor b = floats(*cache, kMiB / 4);
  at::Tensor c = floats(*cache, kMiB / 2);  // 2 MiB
  void* b_address = b.data_ptr();
  void* c_address = c.data_ptr();
  a = at::Tensor();
  b = at::Tensor();
  EXPECT_EQ(cache->stats().cached_bytes, 2 * kMiB);
  c = at::Tensor();  // 4 MiB would be over the bound: a, the least recently freed, goes
  EXPECT_EQ(cache->stats().cached_bytes, 3 * kMiB);
  EXPECT_EQ(floats(*cache, kMiB / 4).data_ptr(), b_address);
  EXPECT_EQ(floats(*cache, kMiB / 2).data_ptr(), c_address);
  // (Both went back when those temporaries died.) A block larger than the whole bound is never
  // kept, and pushes nothing out.
  EXPECT_EQ(cache->stats().cached_bytes, 3 * kMiB);
  { at::Tensor huge = floats(*cache, kMiB); }
  EXPECT_EQ(cache->stats().cached_bytes, 3 * kMiB);
  EXPECT_EQ(cache->stats().in_use_bytes, 0);
}

TEST(HostBlockCache, LeavesToTorchWhatItDoesNotServe) {
  auto cache = std::make_shared<HostBlockCache>(64 * kMiB);
  const auto cpu = at::TensorOptions().dtype(at::kFloat);
  EXPECT_FALSE(cache->allocate({1024}, cpu).has_value());  // under kMinCachedBytes
  EXPECT_FALSE(
      cache->allocate({kMiB}, cpu.memory_format(at::MemoryFormat::ChannelsLast)).has_value());
  EXPECT_FALSE(cache->allocate({kMiB}, cpu.device(at::kMeta)).has_value());
  auto off = std::make_shared<HostBlockCache>(0);
  EXPECT_FALSE(off->allocate({kMiB}, cpu).has_value());
  EXPECT_EQ(cache->stats().allocations, 0);
}

TEST(HostBlockCache, AnOutputCanBeResizedLikeAnyCpuTensor) {
  auto cache = std::make_shared<HostBlockCache>(64 * kMiB);
  at::Tensor tensor = floats(*cache, kMiB / 4);
  tensor.fill_(1);
  tensor.resize_({kMiB});  // grows: the data moves to ordinary memory
  EXPECT_EQ(tensor.narrow(0, 0, kMiB / 4).sum().item<double>(), kMiB / 4);
  EXPECT_EQ(cache->stats().in_use_bytes, 0);
  EXPECT_EQ(cache->stats().cached_bytes, kMiB);
}

}  // namespace
}  // namespace c10d_func
