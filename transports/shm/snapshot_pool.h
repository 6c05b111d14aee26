#pragma once
// Private copies of the inputs of queued shm collectives, from buffers that are kept and reused:
// on hosts where a page fault is expensive, a fresh allocation per large collective costs more
// than the collective. At most kKeep buffers are kept; a copy's buffer returns when its tensor
// dies.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace c10d_func::shm {

class SnapshotPool : public std::enable_shared_from_this<SnapshotPool> {
 public:
  at::Tensor copy_of(const at::Tensor& input);
  ~SnapshotPool();

 private:
  static constexpr size_t kKeep = 4;

  std::pair<void*, size_t> take(size_t bytes);
  void give_back(void* data, size_t capacity);

  std::mutex mutex_;
  std::vector<std::pair<size_t, void*>> free_;  // (capacity, data)
};

}  // namespace c10d_func::shm
