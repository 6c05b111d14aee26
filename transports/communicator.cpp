// The failure flag shared by every Communicator; see communicator.h.
#include "transports/communicator.h"
#include "transports/host_block_cache.h"

namespace c10d_func {

void Communicator::mark_failed(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_) {
      return;
    }
    failure_ = reason;
    failed_.store(true, std::memory_order_release);
  }
  on_failed(reason);
}

std::optional<std::string> Communicator::failure() const {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_) {
      return failure_;
    }
  }
  const Communicator* source = failure_source();
  return source != nullptr ? source->failure() : std::nullopt;
}

at::Tensor Communicator::snapshot(const at::Tensor& input) {
  return private_host_copy(input);
}

at::Tensor Communicator::new_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  return private_host_tensor(sizes, options);
}

std::vector<std::pair<std::string, int64_t>> Communicator::memory_stats() const {
  return private_host_cache_stats();
}

std::vector<std::pair<std::string, int64_t>> private_host_cache_stats() {
  const HostCacheStats stats = process_host_cache().stats();
  return {{"private_cached_bytes", stats.cached_bytes},
          {"private_in_use_bytes", stats.in_use_bytes},
          {"private_allocations", stats.allocations},
          {"private_reuses", stats.reuses}};
}

}  // namespace c10d_func
