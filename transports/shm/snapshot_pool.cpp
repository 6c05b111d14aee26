// Reused buffers for the inputs of queued shm collectives; see snapshot_pool.h.
#include "transports/shm/snapshot_pool.h"

#include <ATen/ATen.h>

#include "transports/shm/shm_layout.h"

#include <algorithm>
#include <cstdlib>

namespace c10d_func::shm {

at::Tensor SnapshotPool::copy_of(const at::Tensor& input) {
  const size_t bytes = std::max<size_t>(nbytes(input), 1);
  auto [data, capacity] = take(bytes);
  auto self = shared_from_this();
  at::Tensor copy = at::from_blob(
      data, input.sizes(),
      [self, data = data, capacity = capacity](void*) { self->give_back(data, capacity); },
      input.options().memory_format(at::MemoryFormat::Contiguous));
  copy.copy_(input);
  return copy;
}

SnapshotPool::~SnapshotPool() {
  for (auto& [capacity, data] : free_) {
    std::free(data);
  }
}

std::pair<void*, size_t> SnapshotPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first >= bytes && (best == free_.end() || it->first < best->first)) {
        best = it;
      }
    }
    if (best != free_.end()) {
      auto found = std::make_pair(best->second, best->first);
      free_.erase(best);
      return found;
    }
  }
  const size_t capacity = round_up(bytes, kAlign);
  void* data = std::aligned_alloc(kAlign, capacity);
  TORCH_CHECK(data != nullptr, "c10d_func shm: out of memory for a ", capacity, "-byte copy");
  return {data, capacity};
}

void SnapshotPool::give_back(void* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() < kKeep) {
    free_.emplace_back(capacity, data);
    return;
  }
  auto smallest = std::min_element(free_.begin(), free_.end());
  if (smallest->first < capacity) {  // keep the larger buffers: they serve more requests
    std::free(smallest->second);
    *smallest = {capacity, data};
  } else {
    std::free(data);
  }
}

}  // namespace c10d_func::shm
