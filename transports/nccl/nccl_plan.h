#pragma once
// The sends and receives of the NCCL collectives that NCCL has no call for (gather, scatter,
// all_to_all with splits: one ncclGroupStart/End of point-to-point calls), as plain data: which
// peer, at which byte offset of the input or output, how many bytes. Torch-free and NCCL-free, so
// tests/cpp/nccl_plan_test.cpp simulates every member's buffers through the plans on the CPU and
// compares the outputs with the collective's definition. nccl_communicator.cpp only issues them.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace c10d_func::nccl {

struct Transfer {
  bool send;      // ncclSend from the input, else ncclRecv into the output
  int64_t peer;   // the other member's rank in the communicator
  size_t offset;  // bytes into the input (send) or the output (receive)
  size_t bytes;   // never 0: empty transfers are left out
};

// gather: every member (root included) sends its `bytes` to `root`; root receives member m's
// into output offset m * bytes.
std::vector<Transfer> gather_plan(int64_t rank, int64_t size, int64_t root, size_t bytes);

// scatter: root sends input block m (offset m * bytes) to member m; every member receives its
// `bytes` from root.
std::vector<Transfer> scatter_plan(int64_t rank, int64_t size, int64_t root, size_t bytes);

// all_to_all: the member sends input_splits[m] rows of `in_row_bytes` to member m (the blocks in
// member order) and receives output_splits[m] rows of `out_row_bytes` from member m.
std::vector<Transfer> all_to_all_plan(int64_t size, const std::vector<int64_t>& output_splits,
                                      const std::vector<int64_t>& input_splits,
                                      size_t out_row_bytes, size_t in_row_bytes);

}  // namespace c10d_func::nccl
