// ShmCommunicator: the collectives over the segment's slots and the direct path; the design is
// described in shm_communicator.h.
#include "transports/shm/shm_communicator.h"

#include <ATen/ATen.h>

#include "transports/byte_reduce.h"
#include "transports/reduction_staging.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/shm_direct.h"
#include "transports/shm/shm_formation.h"
#include "transports/shm/shm_issue_order.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_members.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_slots.h"
#include "transports/shm/stream_copy.h"
#include "transports/shm/symmetric_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace c10d_func {
namespace {

using Clock = std::chrono::steady_clock;
using shm::MemberControl;
using shm::SharedSegment;
using namespace shm;  // the segment's layout and codes (shm_layout.h)
using Turn = IssueOrder::Turn;

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(SharedSegment segment, const Rendezvous& rendezvous,
                  const CheckedSegment& checked, bool cross_memory)
      : segment_(std::make_shared<SharedSegment>(std::move(segment))),
        rank_(rendezvous.rank),
        size_(rendezvous.size),
        one_ordered_caller_(rendezvous.one_ordered_caller),
        chunk_(checked.chunk_bytes),
        region_bytes_(checked.region_bytes),
        sync_(*this, segment_->base(), rendezvous, checked.pids) {
    pool_ = std::make_shared<SymmetricPool>(
        segment_, regions_offset(size_, chunk_) + rank_ * region_bytes_, region_bytes_);
    direct_ = std::make_unique<DirectCollectives>(sync_, pool_, cross_memory,
                                                  regions_offset(size_, chunk_), segment_->size());
    cross_memory_ = cross_memory;
  }

  ~ShmCommunicator() override { order_.stop(); }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string backend_name() const override { return "shm"; }
  void set_timeout(std::chrono::milliseconds timeout) override { sync_.set_timeout(timeout); }

  // Whether an input is read after the op returns is decided per call (it is not when the
  // collective, or the part that reads the input, runs in the call); each collective's method
  // keeps a copy of what it still reads (`kept`).
  bool reads_inputs_after_return(int64_t) const override { return false; }

  // A tensor the user allocated in symmetric memory is read where it lies
  // (docs/symmetric_memory.md: it must not be written until the collective is waited); anything
  // else is copied into a block of the pool, which the direct path then reads in place.
  at::Tensor snapshot(const at::Tensor& input) override {
    if (reads_in_place(input)) {
      return input;
    }
    if (auto copy = pool_->allocate(input.sizes(), input.options(), /*user_owned=*/false)) {
      if (input.is_contiguous()) {
        stream_copy(copy->data_ptr(), input.data_ptr(), nbytes(input), streaming(nbytes(input)));
      } else {
        copy->copy_(input);
      }
      return *copy;
    }
    return Communicator::snapshot(input);  // the pool is full or off: private memory
  }

  bool reads_in_place(const at::Tensor& input) const {
    return pool_->is_user_owned(input) && input.is_contiguous();
  }

  // The turn of an all_reduce or reduce_scatter that, queued, would snapshot its private input
  // (`would_snapshot`): a full copy, more than a member spends reading the input where it is (the
  // direct path copies only the parts the peers read). So when every peer has issued the
  // collective (waited for as long as that copy would take), it runs in the call.
  Turn turn_instead_of_snapshot(const char* op, size_t bytes, bool would_snapshot) {
    Turn turn = order_.take_turn(op, bytes, /*splits=*/would_snapshot);
    turn.in_call = turn.in_call || (would_snapshot && turn.peers_ready);
    return turn;
  }

  // Outputs of large collectives live in symmetric memory: the members write them in place.
  at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    if (c10::multiply_integers(sizes) * options.dtype().itemsize() > kInlineBytes) {
      if (auto output = pool_->allocate(sizes, options, /*user_owned=*/false)) {
        return *output;
      }
    }
    return Communicator::new_output(sizes, options);
  }

  at::Tensor new_symmetric(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    if (auto tensor = pool_->allocate(sizes, options, /*user_owned=*/true)) {
      return *tensor;
    }
    return at::empty(sizes, options);
  }

  std::vector<std::pair<std::string, int64_t>> memory_stats() const override {
    const PoolStats stats = pool_->stats();
    std::vector<std::pair<std::string, int64_t>> counters{
        {"region_bytes", static_cast<int64_t>(region_bytes_)},
        {"reserved_bytes", stats.reserved_bytes},
        {"in_use_bytes", stats.in_use_bytes},
        {"allocations", stats.allocations},
        {"reuses", stats.reuses},
        {"fallbacks", stats.fallbacks},
        {"cross_memory_attach", cross_memory_ ? 1 : 0}};
    for (auto& counter : private_host_cache_stats()) {  // where the fallbacks went
      counters.push_back(std::move(counter));
    }
    return counters;
  }

  std::optional<uint64_t> issued_by(int64_t member) const override {
    if (member < 0 || member >= size_) {
      return std::nullopt;
    }
    return sync_.control(member).issued.load(std::memory_order_acquire);
  }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override {
    return all_reduce_into(buffer, buffer, reduce_op);
  }

  // Reads `input` and writes `output` directly: no copy of the input first.
  Completion all_reduce_into(const at::Tensor& output, const at::Tensor& input,
                             ReduceOp reduce_op) override {
    if (output.numel() == 0) {
      return completed();
    }
    Turn turn = turn_instead_of_snapshot("all_reduce", nbytes(output),
                                         !input.is_same(output) && !reads_in_place(input));
    at::Tensor source = turn.in_call || input.is_same(output) ? input : snapshot(input);
    const bool converts = staged_as_copy(output.scalar_type());
    const bool direct = goes_direct(nbytes(output));
    return order_.submit(std::move(turn), [=, this] {
      at::AutoDispatchBelowADInplaceOrView below;
      if (converts) {  // int16, unsigned, bool: widen into a wire copy, reduce it, copy back
        if (!source.is_same(output)) {
          output.copy_(source);
        }
        auto staged = stage_reduction(output, reduce_op, false);
        slots_.reduce_all(staged.wire, staged.wire, staged.wire_op, reduce_op);
        staged.finish(output, size_);
        return;
      }
      auto staged = stage_reduction(output, reduce_op, false);
      const at::Tensor wire_in =
          c10::isComplexType(source.scalar_type()) ? at::view_as_real(source) : source;
      if (direct &&
          direct_->all_reduce(staged.wire, wire_in, staged.wire_op, reduce_op, staged.divide)) {
        return;  // divided piece by piece, and the wire is the output (or its real view)
      }
      slots_.reduce_all(staged.wire, wire_in, staged.wire_op, reduce_op);
      if (staged.needs_finish()) {
        staged.finish(output, size_);
      }
    });
  }

  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    return all_reduce(buffer, reduce_op);  // every member computes it; the kernel zeroes non-roots
  }

  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    if (input.numel() == 0) {
      return completed();
    }
    const bool direct = goes_direct(nbytes(input));
    Turn turn = order_.take_turn("all_gather", nbytes(output));
    const at::Tensor sent = kept_in_own_block(turn, input, output);
    return order_.submit(std::move(turn), [this, output, input = sent, direct] {
      if (direct && direct_->all_gather(output, input)) {
        return;
      }
      const size_t total = nbytes(input);
      begin(OpCode::kAllGather, total);
      for (size_t off = 0; off < total; off += chunk_) {
        const size_t len = std::min(chunk_, total - off);
        const int set = slots_.next_set();
        std::memcpy(slots_.slot(set, rank_), bytes_of(input) + off, len);
        barrier("all_gather");
        for (int64_t m = 0; m < size_; ++m) {
          std::memcpy(bytes_of(output) + m * total + off, slots_.slot(set, m), len);
        }
      }
    });
  }

  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override {
    if (input.numel() == 0) {
      return completed();
    }
    const bool direct = goes_direct(nbytes(input));
    Turn turn = turn_instead_of_snapshot("reduce_scatter", nbytes(input),
                                         FunctionalOpCall::active() && !reads_in_place(input));
    const at::Tensor sent = kept(turn, input);
    return order_.submit(std::move(turn), [this, output, input = sent, reduce_op, direct] {
      at::AutoDispatchBelowADInplaceOrView below;
      auto staged = stage_reduction(output, reduce_op, false);
      at::Tensor wire_in;
      if (c10::isComplexType(input.scalar_type())) {
        wire_in = at::view_as_real(input);
      } else {
        wire_in = input.scalar_type() == staged.wire.scalar_type()
                      ? input
                      : input.to(staged.wire.scalar_type());
      }
      if (direct && direct_->reduce_scatter(staged.wire, wire_in, staged.wire_op, reduce_op)) {
        if (staged.needs_finish()) {
          staged.finish(output, size_);
        }
        return;
      }
      const auto dtype = staged.wire.scalar_type();
      const size_t element = c10::elementSize(dtype);
      const size_t block = nbytes(staged.wire);  // each member's share
      const size_t piece = std::max(element, chunk_ / size_ / element * element);
      begin(OpCode::kReduceScatter,
            (block * 131 + static_cast<uint64_t>(dtype)) * 31 + static_cast<uint64_t>(reduce_op));
      for (size_t off = 0; off < block; off += piece) {
        const size_t len = std::min(piece, block - off);
        const int set = slots_.next_set();
        for (int64_t m = 0; m < size_; ++m) {
          std::memcpy(slots_.slot(set, rank_) + m * piece, bytes_of(wire_in) + m * block + off,
                      len);
        }
        barrier("reduce_scatter");
        std::vector<const char*> sources;
        for (int64_t m = 0; m < size_; ++m) {
          sources.push_back(slots_.slot(set, m) + rank_ * piece);
        }
        reduce_into(bytes_of(staged.wire) + off, sources, static_cast<int64_t>(len / element),
                    dtype, staged.wire_op);
      }
      if (staged.needs_finish()) {
        staged.finish(output, size_);
      }
    });
  }

  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    const size_t in_rows = input.dim() == 0 ? 1 : input.size(0);
    const size_t row = in_rows == 0 ? 0 : nbytes(input) / in_rows;
    const size_t out_rows = output.dim() == 0 ? 1 : output.size(0);
    const size_t out_row = out_rows == 0 ? 0 : nbytes(output) / out_rows;
    Turn turn = order_.take_turn("all_to_all", std::max(nbytes(input), nbytes(output)),
                                 /*splits=*/region_bytes_ > 0);
    const auto byte_splits = [=](DirectCollectives::Unfinished* unfinished) {
      std::vector<size_t> send(size_), receive(size_);
      for (int64_t m = 0; m < size_; ++m) {
        send[m] = input_split_sizes[m] * row;
        receive[m] = output_split_sizes[m] * out_row;
      }
      return direct_->all_to_all(output, input, send, receive, unfinished);
    };
    if (!turn.in_call && turn.peers_ready) {
      // Every peer has issued it: this member writes its pieces into the receivers' outputs
      // inside the call, which is all that reads its input, so the input needs no copy; only
      // the last barrier is queued.
      return order_.submit_split(std::move(turn), [=, this]() -> std::function<void()> {
        DirectCollectives::Unfinished unfinished;
        if (byte_splits(&unfinished)) {
          return [this, unfinished] { direct_->finish(unfinished); };
        }
        slots_.all_to_all(output, input, row, out_row, output_split_sizes, input_split_sizes);
        return nullptr;
      });
    }
    const at::Tensor sent = kept(turn, input);
    return order_.submit(std::move(turn), [this, output, input = sent, row, out_row,
                                           output_split_sizes, input_split_sizes] {
      if (region_bytes_ > 0) {  // every member decides alike: the region is rank 0's
        std::vector<size_t> send(size_), receive(size_);
        for (int64_t m = 0; m < size_; ++m) {
          send[m] = input_split_sizes[m] * row;
          receive[m] = output_split_sizes[m] * out_row;
        }
        if (direct_->all_to_all(output, input, send, receive)) {
          return;
        }
      }
      slots_.all_to_all(output, input, row, out_row, output_split_sizes, input_split_sizes);
    });
  }

  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    return broadcast_into(buffer, buffer, root);
  }

  // Non-root members write `output` straight from the root's slot: no copy of the input first.
  Completion broadcast_into(const at::Tensor& output, const at::Tensor& input,
                            int64_t root) override {
    if (output.numel() == 0) {
      return completed();
    }
    const bool direct = goes_direct(nbytes(output));
    Turn turn = order_.take_turn("broadcast", nbytes(output), /*splits=*/direct && rank_ == root);
    if (rank_ == root && !turn.in_call && turn.peers_ready) {
      // Every peer has issued it: the root copies its data where the others read it inside the
      // call, piece by piece while they copy it out (all that reads its input), and queues only
      // the last barrier.
      return order_.submit_split(std::move(turn), [=, this]() -> std::function<void()> {
        DirectCollectives::Unfinished unfinished;
        if (direct_->broadcast(output, input, root, &unfinished)) {
          return [this, unfinished] { direct_->finish(unfinished); };
        }
        broadcast_through_slots(output, input, root);
        return nullptr;
      });
    }
    at::Tensor source = input;
    if (rank_ == root && !turn.in_call && !input.is_same(output) && FunctionalOpCall::active()) {
      // The root's copy of its input goes straight into its output (which nobody reads before
      // the wait), and the others read it there: one copy instead of a snapshot and a copy.
      if (direct && input.is_contiguous() && pool_->offset_in_segment(output)) {
        stream_copy(output.data_ptr(), input.data_ptr(), nbytes(output), streaming(nbytes(output)));
        source = output;
      } else {
        source = kept(turn, input);
      }
    }
    return order_.submit(std::move(turn), [this, output, source, root, direct] {
      if (direct && direct_->broadcast(output, source, root)) {
        return;
      }
      broadcast_through_slots(output, source, root);
    });
  }

  // broadcast in 4 MiB rounds through the root's slot.
  void broadcast_through_slots(const at::Tensor& output, const at::Tensor& source, int64_t root) {
    const size_t total = nbytes(output);
    begin(OpCode::kBroadcast, total * 131 + static_cast<uint64_t>(root));
    for (size_t off = 0; off < total; off += chunk_) {
      const size_t len = std::min(chunk_, total - off);
      const int set = slots_.next_set();
      if (rank_ == root) {
        std::memcpy(slots_.slot(set, root), bytes_of(source) + off, len);
        if (!source.is_same(output)) {
          std::memcpy(bytes_of(output) + off, bytes_of(source) + off, len);
        }
      }
      barrier("broadcast");
      if (rank_ != root) {
        std::memcpy(bytes_of(output) + off, slots_.slot(set, root), len);
      }
    }
  }

  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (input.numel() == 0) {
      return completed();
    }
    const bool direct = goes_direct(nbytes(input));
    Turn turn = order_.take_turn("gather", nbytes(input));
    const at::Tensor sent = kept(turn, input);
    return order_.submit(std::move(turn), [this, output, input = sent, root, direct] {
      if (direct && direct_->gather(output, input, root)) {
        return;
      }
      const size_t total = nbytes(input);
      begin(OpCode::kGather, total * 131 + static_cast<uint64_t>(root));
      for (size_t off = 0; off < total; off += chunk_) {
        const size_t len = std::min(chunk_, total - off);
        const int set = slots_.next_set();
        std::memcpy(slots_.slot(set, rank_), bytes_of(input) + off, len);
        barrier("gather");
        if (rank_ == root) {
          for (int64_t m = 0; m < size_; ++m) {
            std::memcpy(bytes_of(output) + m * total + off, slots_.slot(set, m), len);
          }
        }
      }
    });
  }

  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (output.numel() == 0) {
      return completed();
    }
    const bool direct = goes_direct(nbytes(output));
    Turn turn = order_.take_turn("scatter", nbytes(output));
    const at::Tensor sent = rank_ == root ? kept(turn, input) : input;  // only the root's is read
    return order_.submit(std::move(turn), [this, output, input = sent, root, direct] {
      if (direct && direct_->scatter(output, input, root)) {
        return;
      }
      const size_t total = nbytes(output);
      begin(OpCode::kScatter, total * 131 + static_cast<uint64_t>(root));
      for (size_t off = 0; off < total; off += chunk_) {
        const size_t len = std::min(chunk_, total - off);
        const int set = slots_.next_set();
        if (rank_ == root) {
          for (int64_t m = 0; m < size_; ++m) {
            std::memcpy(slots_.slot(set, m), bytes_of(input) + m * total + off, len);
          }
        }
        barrier("scatter");
        std::memcpy(bytes_of(output) + off, slots_.slot(set, rank_), len);
      }
    });
  }

 private:
  MemberControl& control(int64_t member) const { return sync_.control(member); }
  void begin(OpCode op, uint64_t detail) { sync_.begin(op, detail); }
  void barrier(const char* op) { sync_.barrier(op); }

  // Large messages go the direct way when symmetric memory is on (rank 0's region size, so every
  // member decides alike for sizes they share).
  bool goes_direct(size_t bytes) const { return region_bytes_ > 0 && bytes > kInlineBytes; }

  // What a queued collective may read of `input`: where the caller may write it as soon as the
  // op returns (FunctionalOpCall), a copy (in the pool when large, so the others read it
  // in place); the input itself when the collective runs in the call or the caller keeps it
  // untouched until the wait.
  at::Tensor kept(const Turn& turn, const at::Tensor& input) {
    if (turn.in_call || !FunctionalOpCall::active()) {
      return input;
    }
    if (nbytes(input) > kInlineBytes) {
      return snapshot(input);
    }
    return input.clone(at::MemoryFormat::Contiguous);
  }

  // kept() for all_gather: the caller's own block of `output` filled with `input` now, where
  // its input ends up anyway, instead of a copy elsewhere (the others read it there).
  at::Tensor kept_in_own_block(const Turn& turn, const at::Tensor& input,
                               const at::Tensor& output) {
    if (turn.in_call || !FunctionalOpCall::active() || nbytes(input) <= kInlineBytes ||
        !output.is_contiguous() || !input.is_contiguous()) {
      return kept(turn, input);
    }
    at::Tensor own = output.view(-1).narrow(0, rank_ * input.numel(), input.numel());
    stream_copy(own.data_ptr(), input.data_ptr(), nbytes(input), streaming(nbytes(input)));
    return own.view(input.sizes());
  }

  void on_failed(const std::string& reason) override { sync_.publish_failure(reason); }

  std::shared_ptr<SharedSegment> segment_;  // shared with the pool: blocks outlive this
  int64_t rank_;
  int64_t size_;
  bool one_ordered_caller_;    // Rendezvous::one_ordered_caller
  size_t chunk_;               // the header's, as forming checked it (never read there again)
  size_t region_bytes_;        // likewise
  bool cross_memory_ = false;  // private tensors are reached with process_vm_readv/writev
  std::shared_ptr<SymmetricPool> pool_;

  // Touched only by the thread running collectives (one at a time, in issue order).
  shm::Members sync_;
  std::unique_ptr<DirectCollectives> direct_;
  Slots slots_{segment_->base() + data_offset(size_), chunk_, rank_, size_, sync_};

  IssueOrder order_{*this, sync_, rank_, size_, one_ordered_caller_};
};

}  // namespace

std::shared_ptr<Communicator> shm::communicator_on(SharedSegment segment,
                                                   const Rendezvous& rendezvous,
                                                   const CheckedSegment& checked,
                                                   bool cross_memory) {
  return std::make_shared<ShmCommunicator>(std::move(segment), rendezvous, checked, cross_memory);
}

}  // namespace c10d_func
