#pragma once
// DirectCollectives: the shm transport's collectives on symmetric memory. Each member publishes
// where its input (and, for all_reduce, its output) lies in the segment, all meet at one
// barrier, then every member reads the others' tensors in place and writes its own result (or,
// for all_reduce, its share of everyone's; all_to_all pushes into the receivers' outputs
// instead, and broadcast pipelines the root's copy with the others' reads), and a second
// barrier ends the collective: two
// barriers whatever the size, and each byte moved once, where the slots stream a message through
// 4 MiB pieces with a barrier (or two) per piece and copy it in and out.
//
// A tensor already in the segment (a collective's output, a snapshot of a queued collective's
// input, a c10d_func.empty tensor) is used where it lies. Another one (the caller's buffer of an
// in-place call, a classic call's input) is reached with cross-memory attach where every member
// can (cross_memory.h) and it is large (16 MiB), else first copied into a block of this
// member's pool. When some member
// finds no room for that (the pool's bound), every member learns it at the first barrier and the
// call returns false: the caller then runs the collective through the slots, so a full pool
// costs speed, never an error.
#include "transports/shm/cross_memory.h"
#include "transports/shm/shm_members.h"
#include "transports/shm/symmetric_pool.h"

#include <memory>
#include <vector>

namespace c10d_func::shm {

class DirectCollectives {
 public:
  // Peers' tensors in the segment must lie in [regions_begin, segment_end): the members'
  // symmetric memory (shm_checks.h).
  DirectCollectives(Members& members, std::shared_ptr<SymmetricPool> pool, bool cross_memory,
                    uint64_t regions_begin, uint64_t segment_end)
      : members_(members),
        pool_(std::move(pool)),
        cross_memory_(cross_memory),
        regions_begin_(regions_begin),
        segment_end_(segment_end) {}

  // Every member's `input` reduced into `output` (same wire dtype, contiguous; may be the same
  // tensor). `asked` is the reduction members compare (avg arrives as a sum to divide).
  bool all_reduce(const at::Tensor& output, const at::Tensor& input, ReduceOp op, ReduceOp asked,
                  bool divide);
  bool all_gather(const at::Tensor& output, const at::Tensor& input);
  // The caller finishes avg (its share is small).
  bool reduce_scatter(const at::Tensor& output, const at::Tensor& input, ReduceOp op,
                      ReduceOp asked);
  // What is left of a collective that returned before its last barrier: the barrier, and the
  // copy out of a staged output.
  struct Unfinished {
    const char* op = nullptr;
    at::Tensor output;
    at::Tensor staged;  // defined when the output lies outside the segment
    at::Tensor keep;    // a block the others read until the last barrier
    // The peers' permission to attach to this member, held until the last barrier.
    std::shared_ptr<AttachPermission> attach;
  };
  void finish(const Unfinished& unfinished);

  // Byte lengths of what this member sends to and receives from each member, in member order.
  // Every member writes its pieces into the receivers' outputs (pushed, so no input needs to be
  // where the others can read it). With `unfinished`, returns once this member's pieces are
  // written, which is all that reads `input`, and leaves the rest there for finish().
  bool all_to_all(const at::Tensor& output, const at::Tensor& input,
                  const std::vector<size_t>& send, const std::vector<size_t>& receive,
                  Unfinished* unfinished = nullptr);
  // Pipelined: the others copy each piece of the root's data as soon as it is where they read
  // it. With `unfinished`, the root returns after its last piece (all that reads `input`).
  bool broadcast(const at::Tensor& output, const at::Tensor& input, int64_t root,
                 Unfinished* unfinished = nullptr);
  bool gather(const at::Tensor& output, const at::Tensor& input, int64_t root);
  bool scatter(const at::Tensor& output, const at::Tensor& input, int64_t root);

 private:
  // Where the others find a tensor: an offset in the segment, or kAttached with its address.
  struct Placement {
    int64_t offset = kUnplaced;
    uint64_t address = 0;
  };
  // `tensor`'s placement; a tensor outside the segment is attached where every member can
  // attach, else copied (when `copy`) into a pool block kept in `staged`; kUnplaced when no
  // room is left.
  Placement place(const at::Tensor& tensor, at::Tensor& staged, bool copy);
  // place() for an input whose bytes [own_begin, own_end) only this member reads, where they
  // are: a staged copy holds the rest, what the peers read.
  Placement place_for_peers(const at::Tensor& input, at::Tensor& staged, size_t own_begin,
                            size_t own_end);
  // Publishes this member's placements, passes the first barrier and says whether every member
  // placed what the collective needs (`input_needed(m)` / `output_needed(m)` of member m); a
  // needed placement that could not hold `input_bytes` / `output_bytes` fails the collective on
  // every member (shm_checks.h).
  template <typename InputNeeded, typename OutputNeeded>
  bool agree(const char* op, OpCode code, uint64_t detail, Placement input, Placement output,
             InputNeeded input_needed, OutputNeeded output_needed, uint64_t input_bytes,
             uint64_t output_bytes);
  // Fails the collective when member `m`'s `exposed` place cannot hold `bytes`.
  void check_placed(const char* op, int64_t m, int64_t exposed, uint64_t bytes, const char* what);
  // Ends the peers' permission to attach when the collective returns (unless moved into an
  // Unfinished before).
  struct AttachEnds {
    std::shared_ptr<AttachPermission>& attach;
    ~AttachEnds() { attach.reset(); }
  };
  AttachEnds attach_ends_on_return() { return AttachEnds{attach_}; }

  // Bytes [offset, offset + bytes) of member `m`'s input, wherever it lies, copied to `to`.
  void read_input(const char* op, int64_t m, size_t offset, void* to, size_t bytes, bool streams);
  // Member `m`'s input at `offset` readable in place: its address in the segment, or `scratch`
  // holding a copy (an attached input).
  const char* input_piece(const char* op, int64_t m, size_t offset, size_t bytes, char* scratch);
  void write_output(const char* op, int64_t m, size_t offset, const void* from, size_t bytes,
                    bool streams);

  Members& members_;
  std::shared_ptr<SymmetricPool> pool_;
  bool cross_memory_;
  uint64_t regions_begin_;
  uint64_t segment_end_;
  // While this member's tensor is attached: its peers may attach to it (cross_memory.h).
  std::shared_ptr<AttachPermission> attach_;
  // Every member's placements in the collective running, as agree() read and checked them.
  std::vector<Placement> inputs_;
  std::vector<Placement> outputs_;
  // all_to_all's directory as read once before its checks (kept: no allocation per call).
  std::vector<int64_t> directory_;
};

}  // namespace c10d_func::shm
