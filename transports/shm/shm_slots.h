#pragma once
// The segment's slots: two buffer sets, each with one slot per member and one result slot, all of
// the chunk size; consecutive chunks use the sets in turn (shm_communicator.h). And the
// all_reduce and all_to_all that run through them.
#include <ATen/core/Tensor.h>

#include "transports/reduce_op.h"
#include "transports/shm/shm_members.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace c10d_func::shm {

class Slots {
 public:
  // `data`: the first slot of the first set; `sync`: the members' barriers.
  Slots(char* data, size_t chunk, int64_t rank, int64_t size, Members& sync)
      : data_(data), chunk_(chunk), rank_(rank), size_(size), sync_(sync) {}

  char* slot(int set, int64_t member) const {
    return data_ + (static_cast<size_t>(set) * (size_ + 1) + member) * chunk_;
  }
  char* result_slot(int set) const { return slot(set, size_); }
  // The set the next chunk uses (touched only by the thread running collectives).
  int next_set() { return static_cast<int>(sets_used_++ & 1); }

  // In-place or out-of-place reduction of every member's `input` into `output` (same dtype, a
  // dtype every reduction takes: staging has widened what it must). `asked` is the reduction the
  // caller asked for (avg is staged as sum): members compare it, so a member asking for another
  // reduction fails the collective instead of getting a silently wrong result.
  void reduce_all(const at::Tensor& output, const at::Tensor& input, ReduceOp op, ReduceOp asked);

  // all_to_all in rounds of a slot through the slots; `row`/`out_row`: the bytes of a dim-0 row
  // of `input`/`output`. The members agree on the number of rounds (each checks the others'),
  // and every member checks that what each sends each is what that one expects.
  void all_to_all(const at::Tensor& output, const at::Tensor& input, size_t row, size_t out_row,
                  const std::vector<int64_t>& output_split_sizes,
                  const std::vector<int64_t>& input_split_sizes);

 private:
  // Fails the collective on every member when the sizes the members showed in their slots of
  // `set` (each member's sends, then its receives, per member) are out of bounds or do not pair.
  void check_pairs(int set) const;

  char* data_;
  size_t chunk_;
  int64_t rank_;
  int64_t size_;
  Members& sync_;
  uint64_t sets_used_ = 0;
};

}  // namespace c10d_func::shm
