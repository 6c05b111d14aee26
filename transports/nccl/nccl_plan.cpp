// See nccl_plan.h.
#include "transports/nccl/nccl_plan.h"

namespace c10d_func::nccl {

std::vector<Transfer> gather_plan(int64_t rank, int64_t size, int64_t root, size_t bytes) {
  std::vector<Transfer> plan;
  if (bytes == 0) {
    return plan;
  }
  plan.push_back({true, root, 0, bytes});
  if (rank == root) {
    for (int64_t peer = 0; peer < size; ++peer) {
      plan.push_back({false, peer, static_cast<size_t>(peer) * bytes, bytes});
    }
  }
  return plan;
}

std::vector<Transfer> scatter_plan(int64_t rank, int64_t size, int64_t root, size_t bytes) {
  std::vector<Transfer> plan;
  if (bytes == 0) {
    return plan;
  }
  if (rank == root) {
    for (int64_t peer = 0; peer < size; ++peer) {
      plan.push_back({true, peer, static_cast<size_t>(peer) * bytes, bytes});
    }
  }
  plan.push_back({false, root, 0, bytes});
  return plan;
}

std::vector<Transfer> all_to_all_plan(int64_t size, const std::vector<int64_t>& output_splits,
                                      const std::vector<int64_t>& input_splits,
                                      size_t out_row_bytes, size_t in_row_bytes) {
  std::vector<Transfer> plan;
  size_t in_offset = 0;
  size_t out_offset = 0;
  for (int64_t peer = 0; peer < size; ++peer) {
    const size_t send = static_cast<size_t>(input_splits[peer]) * in_row_bytes;
    const size_t recv = static_cast<size_t>(output_splits[peer]) * out_row_bytes;
    if (send > 0) {
      plan.push_back({true, peer, in_offset, send});
    }
    if (recv > 0) {
      plan.push_back({false, peer, out_offset, recv});
    }
    in_offset += send;
    out_offset += recv;
  }
  return plan;
}

}  // namespace c10d_func::nccl
