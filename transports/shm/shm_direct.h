#pragma once
// DirectCollectives: the shm transport's collectives on symmetric memory. Each member publishes
// where its input (and, for all_reduce, its output) lies in the segment, all meet at one
// barrier, then every member reads the others' tensors in place and writes its own result (or,
// for all_reduce, its share of everyone's), and a second barrier ends the collective: two
// barriers whatever the size, and each byte moved once, where the slots stream a message through
// 4 MiB pieces with a barrier (or two) per piece and copy it in and out.
//
// A tensor already in the segment (a collective's output, a snapshot of a queued collective's
// input, a c10d_func.empty tensor) is used where it lies; another is first copied into a block
// of this member's pool. When some member finds no room for that (the pool's bound), every
// member learns it at the first barrier and the call returns false: the caller then runs the
// collective through the slots, so a full pool costs speed, never an error.
#include "transports/shm/shm_members.h"
#include "transports/shm/symmetric_pool.h"

#include <memory>
#include <vector>

namespace c10d_func::shm {

class DirectCollectives {
 public:
  DirectCollectives(Members& members, std::shared_ptr<SymmetricPool> pool)
      : members_(members), pool_(std::move(pool)) {}

  // Every member's `input` reduced into `output` (same wire dtype, contiguous; may be the same
  // tensor). `asked` is the reduction members compare (avg arrives as a sum to divide).
  bool all_reduce(const at::Tensor& output, const at::Tensor& input, ReduceOp op, ReduceOp asked,
                  bool divide);
  bool all_gather(const at::Tensor& output, const at::Tensor& input);
  // The caller finishes avg (its share is small).
  bool reduce_scatter(const at::Tensor& output, const at::Tensor& input, ReduceOp op,
                      ReduceOp asked);
  // Byte lengths of what this member sends to and receives from each member, in member order.
  bool all_to_all(const at::Tensor& output, const at::Tensor& input,
                  const std::vector<size_t>& send, const std::vector<size_t>& receive);
  bool broadcast(const at::Tensor& output, const at::Tensor& input, int64_t root);
  bool gather(const at::Tensor& output, const at::Tensor& input, int64_t root);
  bool scatter(const at::Tensor& output, const at::Tensor& input, int64_t root);

 private:
  // Where `tensor` lies in the segment, copying it into a pool block (kept in `staged`) when it
  // lies elsewhere and `copy` is true; -1 when it cannot be placed.
  int64_t place(const at::Tensor& tensor, at::Tensor& staged, bool copy);
  // Publishes this member's offsets, passes the first barrier and says whether every member
  // placed what the collective needs (`input_needed(m)` / `output_needed(m)` of member m).
  template <typename InputNeeded, typename OutputNeeded>
  bool agree(const char* op, OpCode code, uint64_t detail, int64_t input_at, int64_t output_at,
             InputNeeded input_needed, OutputNeeded output_needed);
  const char* input_of(int64_t member) const;
  char* output_of(int64_t member) const;

  Members& members_;
  std::shared_ptr<SymmetricPool> pool_;
};

}  // namespace c10d_func::shm
