// ShmCommunicator: every collective of the library between the processes of one host, through
// one shared-memory segment per communicator (transports/shm/shm_segment.h).
//
// Segment: a header, one MemberControl per member, then two buffer sets, each with one slot per
// member and one result slot, all of C10D_FUNC_SHM_CHUNK_BYTES (4 MiB by default). A message
// larger than a slot streams through in chunks. Consecutive chunks (of one op or the next) use
// the two sets in turn, so a member may write the next chunk while the others still read the
// previous one; the barrier of chunk k+1 is what frees the set of chunk k.
//
// Each chunk: every member copies its part into its slot, all meet at a barrier, then each reads
// what it needs from the others' slots. Reductions of small chunks are done whole by every
// member (one barrier); of large chunks, member i reduces the i-th slice into the result slot,
// and after a second barrier everyone copies the result out (a reduce-scatter then an
// all-gather: each member reduces 1/n of the data). Reductions run ATen's vectorised kernels
// over views of the slots, with the dtype staging every transport shares.
//
// Large messages (over 256 KiB) and every all_to_all take the direct path instead
// (shm_direct.h): members read (or write) each other's tensors in place in symmetric memory, the
// segment's per-member regions, from which the outputs of large collectives and the snapshots of
// queued collectives' inputs are allocated (symmetric_pool.h). The slots serve small messages, and
// large ones when a member's pool is full. Barriers, announcements and failures: shm_members.h.
//
// Progress: collectives run in issue order. One that is small (<= 256 KiB) runs inside the call,
// and is complete when the op returns, when nothing is queued and every peer has issued it too
// (each member counts what it issued in its control block); others are queued (task_queue.h)
// and the op returns at once: the progress thread runs them, or the thread that waits one when
// it is next. A large all_to_all, and the root of a large broadcast, whose peers have all issued
// it run inside the call the part that reads the input and queue the rest (submit_split): the
// input then needs no copy (a queued collective reads a copy of a functional op's input, whose
// caller may write it once the op returns; see kept). A caller thus never blocks on a
// peer that has not issued the collective: that peer may be blocked itself, in a call on another
// tag that waits for this member's next call, and a queued collective completes whatever the
// callers do. The ordering rule, as NCCL has one: every member must issue the collectives of one
// communicator (tag and chunk) in the same order; across tags, any order (forming a communicator,
// on a tag's first call, does meet the peers inside the call: ops/group_formation.cpp).
#include "transports/shm/shm_communicator.h"

#include <ATen/ATen.h>

#include "transports/reduction_staging.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/shm_direct.h"
#include "transports/shm/shm_formation.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_members.h"
#include "transports/shm/shm_reduce.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/stream_copy.h"
#include "transports/shm/symmetric_pool.h"
#include "transports/task_queue.h"

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

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(SharedSegment segment, const Rendezvous& rendezvous, bool cross_memory)
      : segment_(std::make_shared<SharedSegment>(std::move(segment))),
        rank_(rendezvous.rank),
        size_(rendezvous.size),
        one_ordered_caller_(rendezvous.one_ordered_caller),
        sync_(*this, segment_->base(), rendezvous) {
    const auto* header = reinterpret_cast<const Header*>(segment_->base());
    chunk_ = header->chunk_bytes;
    data_ = segment_->base() + data_offset(size_);
    region_bytes_ = header->region_bytes;
    pool_ = std::make_shared<SymmetricPool>(
        segment_, regions_offset(size_, chunk_) + rank_ * region_bytes_, region_bytes_);
    direct_ = std::make_unique<DirectCollectives>(sync_, pool_, cross_memory,
                                                  regions_offset(size_, chunk_), segment_->size());
    cross_memory_ = cross_memory;
  }

  ~ShmCommunicator() override { queue_->stop(); }

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
    if (pool_->is_user_owned(input) && input.is_contiguous()) {
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
    return input.clone(at::MemoryFormat::Contiguous);
  }

  // Outputs of large collectives live in symmetric memory: the members write them in place.
  at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    if (c10::multiply_integers(sizes) * options.dtype().itemsize() > kInlineBytes) {
      if (auto output = pool_->allocate(sizes, options, /*user_owned=*/false)) {
        return *output;
      }
    }
    return at::empty(sizes, options);
  }

  at::Tensor new_symmetric(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    if (auto tensor = pool_->allocate(sizes, options, /*user_owned=*/true)) {
      return *tensor;
    }
    return at::empty(sizes, options);
  }

  std::vector<std::pair<std::string, int64_t>> memory_stats() const override {
    const PoolStats stats = pool_->stats();
    return {{"region_bytes", static_cast<int64_t>(region_bytes_)},
            {"reserved_bytes", stats.reserved_bytes},
            {"in_use_bytes", stats.in_use_bytes},
            {"allocations", stats.allocations},
            {"reuses", stats.reuses},
            {"fallbacks", stats.fallbacks},
            {"cross_memory_attach", cross_memory_ ? 1 : 0}};
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
    Turn turn = take_turn("all_reduce", nbytes(output));
    at::Tensor source = turn.in_call || input.is_same(output) ? input : snapshot(input);
    const bool converts = staged_as_copy(output.scalar_type());
    const bool direct = goes_direct(nbytes(output));
    return submit(std::move(turn), [=, this] {
      at::AutoDispatchBelowADInplaceOrView below;
      if (converts) {  // int16, unsigned, bool: widen into a wire copy, reduce it, copy back
        if (!source.is_same(output)) {
          output.copy_(source);
        }
        auto staged = stage_reduction(output, reduce_op, false);
        reduce_all(staged.wire, staged.wire, staged.wire_op, reduce_op);
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
      reduce_all(staged.wire, wire_in, staged.wire_op, reduce_op);
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
    Turn turn = take_turn("all_gather", nbytes(output));
    const at::Tensor sent = kept_in_own_block(turn, input, output);
    return submit(std::move(turn), [this, output, input = sent, direct] {
      if (direct && direct_->all_gather(output, input)) {
        return;
      }
      const size_t total = nbytes(input);
      begin(OpCode::kAllGather, total);
      for (size_t off = 0; off < total; off += chunk_) {
        const size_t len = std::min(chunk_, total - off);
        const int set = next_set();
        std::memcpy(slot(set, rank_), bytes_of(input) + off, len);
        barrier("all_gather");
        for (int64_t m = 0; m < size_; ++m) {
          std::memcpy(bytes_of(output) + m * total + off, slot(set, m), len);
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
    Turn turn = take_turn("reduce_scatter", nbytes(input));
    const at::Tensor sent = kept(turn, input);
    return submit(std::move(turn), [this, output, input = sent, reduce_op, direct] {
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
        const int set = next_set();
        for (int64_t m = 0; m < size_; ++m) {
          std::memcpy(slot(set, rank_) + m * piece, bytes_of(wire_in) + m * block + off, len);
        }
        barrier("reduce_scatter");
        std::vector<const char*> sources;
        for (int64_t m = 0; m < size_; ++m) {
          sources.push_back(slot(set, m) + rank_ * piece);
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
    Turn turn = take_turn("all_to_all", std::max(nbytes(input), nbytes(output)),
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
      return submit_split(std::move(turn), [=, this]() -> std::function<void()> {
        DirectCollectives::Unfinished unfinished;
        if (byte_splits(&unfinished)) {
          return [this, unfinished] { direct_->finish(unfinished); };
        }
        all_to_all_through_slots(output, input, row, out_row, output_split_sizes,
                                 input_split_sizes);
        return nullptr;
      });
    }
    const at::Tensor sent = kept(turn, input);
    return submit(std::move(turn), [this, output, input = sent, row, out_row, output_split_sizes,
                                    input_split_sizes] {
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
      all_to_all_through_slots(output, input, row, out_row, output_split_sizes, input_split_sizes);
    });
  }

  // all_to_all in 4 MiB rounds through the slots.
  void all_to_all_through_slots(const at::Tensor& output, const at::Tensor& input, size_t row,
                                size_t out_row, const std::vector<int64_t>& output_split_sizes,
                                const std::vector<int64_t>& input_split_sizes) {
    const size_t piece = std::max<size_t>(kAlign, chunk_ / size_ / kAlign * kAlign);
    std::vector<size_t> send(size_), send_at(size_), recv(size_), recv_at(size_);
    size_t rounds = 0;
    for (int64_t m = 0, s = 0, r = 0; m < size_; ++m) {
      send[m] = input_split_sizes[m] * row;
      recv[m] = output_split_sizes[m] * out_row;
      send_at[m] = s;
      recv_at[m] = r;
      s += send[m];
      r += recv[m];
      rounds = std::max({rounds, (send[m] + piece - 1) / piece, (recv[m] + piece - 1) / piece});
    }
    begin(OpCode::kAllToAll, 0);
    // What a member sends itself is copied directly, not through the segment.
    std::memcpy(bytes_of(output) + recv_at[rank_], bytes_of(input) + send_at[rank_],
                std::min(send[rank_], recv[rank_]));
    // Members know only their own sends and receives: agree on the number of rounds.
    const int parity = sync_.parity();
    control(rank_).value[parity].store(
        corrupts_for_test(ShmFault::kRounds, rank_) ? INT64_MAX : static_cast<int64_t>(rounds),
        std::memory_order_relaxed);
    barrier("all_to_all");
    for (int64_t m = 0; m < size_; ++m) {
      const int64_t theirs = control(m).value[parity].load(std::memory_order_relaxed);
      // A member's rounds cover at most 256 TiB in pieces: a larger count is not a real one.
      const std::string wrong = check_count(theirs, (uint64_t{1} << 48) / piece);
      if (!wrong.empty()) {
        sync_.fail("all_to_all", sync_.name_of(m) + " published a bad number of rounds: " + wrong +
                                     " (a corrupted or version-skewed peer)");
      }
      rounds = std::max(rounds, static_cast<size_t>(theirs));
    }
    for (size_t round = 0; round < rounds; ++round) {
      const size_t off = round * piece;
      const int set = next_set();
      for (int64_t m = 0; m < size_; ++m) {
        if (m != rank_ && off < send[m]) {
          std::memcpy(slot(set, rank_) + m * piece, bytes_of(input) + send_at[m] + off,
                      std::min(piece, send[m] - off));
        }
      }
      barrier("all_to_all");
      for (int64_t m = 0; m < size_; ++m) {
        if (m != rank_ && off < recv[m]) {
          std::memcpy(bytes_of(output) + recv_at[m] + off, slot(set, m) + rank_ * piece,
                      std::min(piece, recv[m] - off));
        }
      }
    }
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
    Turn turn = take_turn("broadcast", nbytes(output), /*splits=*/direct && rank_ == root);
    if (rank_ == root && !turn.in_call && turn.peers_ready) {
      // Every peer has issued it: the root copies its data where the others read it inside the
      // call, piece by piece while they copy it out (all that reads its input), and queues only
      // the last barrier.
      return submit_split(std::move(turn), [=, this]() -> std::function<void()> {
        DirectCollectives::Unfinished unfinished;
        if (direct_->broadcast(output, input, root, &unfinished)) {
          return [this, unfinished] { direct_->finish(unfinished); };
        }
        broadcast_through_slots(output, input, root);
        return nullptr;
      });
    }
    at::Tensor source = input;
    if (rank_ == root && !turn.in_call && !input.is_same(output) &&
        InputsReusedOnReturn::active()) {
      // The root's copy of its input goes straight into its output (which nobody reads before
      // the wait), and the others read it there: one copy instead of a snapshot and a copy.
      if (direct && input.is_contiguous() && pool_->offset_in_segment(output)) {
        stream_copy(output.data_ptr(), input.data_ptr(), nbytes(output), streaming(nbytes(output)));
        source = output;
      } else {
        source = kept(turn, input);
      }
    }
    return submit(std::move(turn), [this, output, source, root, direct] {
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
      const int set = next_set();
      if (rank_ == root) {
        std::memcpy(slot(set, root), bytes_of(source) + off, len);
        if (!source.is_same(output)) {
          std::memcpy(bytes_of(output) + off, bytes_of(source) + off, len);
        }
      }
      barrier("broadcast");
      if (rank_ != root) {
        std::memcpy(bytes_of(output) + off, slot(set, root), len);
      }
    }
  }

  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (input.numel() == 0) {
      return completed();
    }
    const bool direct = goes_direct(nbytes(input));
    Turn turn = take_turn("gather", nbytes(input));
    const at::Tensor sent = kept(turn, input);
    return submit(std::move(turn), [this, output, input = sent, root, direct] {
      if (direct && direct_->gather(output, input, root)) {
        return;
      }
      const size_t total = nbytes(input);
      begin(OpCode::kGather, total * 131 + static_cast<uint64_t>(root));
      for (size_t off = 0; off < total; off += chunk_) {
        const size_t len = std::min(chunk_, total - off);
        const int set = next_set();
        std::memcpy(slot(set, rank_), bytes_of(input) + off, len);
        barrier("gather");
        if (rank_ == root) {
          for (int64_t m = 0; m < size_; ++m) {
            std::memcpy(bytes_of(output) + m * total + off, slot(set, m), len);
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
    Turn turn = take_turn("scatter", nbytes(output));
    const at::Tensor sent = kept(turn, input);
    return submit(std::move(turn), [this, output, input = sent, root, direct] {
      if (direct && direct_->scatter(output, input, root)) {
        return;
      }
      const size_t total = nbytes(output);
      begin(OpCode::kScatter, total * 131 + static_cast<uint64_t>(root));
      for (size_t off = 0; off < total; off += chunk_) {
        const size_t len = std::min(chunk_, total - off);
        const int set = next_set();
        if (rank_ == root) {
          for (int64_t m = 0; m < size_; ++m) {
            std::memcpy(slot(set, m), bytes_of(input) + m * total + off, len);
          }
        }
        barrier("scatter");
        std::memcpy(bytes_of(output) + off, slot(set, rank_), len);
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

  char* slot(int set, int64_t member) const {
    return data_ + (static_cast<size_t>(set) * (size_ + 1) + member) * chunk_;
  }

  char* result_slot(int set) const { return slot(set, size_); }

  int next_set() { return static_cast<int>(sets_used_++ & 1); }

  // In-place or out-of-place reduction of every member's `input` into `output` (same dtype, a
  // dtype every reduction takes: staging has widened what it must). `asked` is the reduction the
  // caller asked for (avg is staged as sum): members compare it, so a member asking for another
  // reduction fails the collective instead of getting a silently wrong result.
  void reduce_all(const at::Tensor& output, const at::Tensor& input, ReduceOp op, ReduceOp asked) {
    const auto dtype = output.scalar_type();
    const size_t element = output.element_size();
    const size_t total = nbytes(output);
    begin(OpCode::kAllReduce,
          (total * 131 + static_cast<uint64_t>(dtype)) * 31 + static_cast<uint64_t>(asked));
    const size_t step = chunk_ / element * element;
    std::vector<const char*> sources(size_);
    for (size_t off = 0; off < total; off += step) {
      const size_t len = std::min(step, total - off);
      const int set = next_set();
      const char* in = bytes_of(input) + off;
      char* out = bytes_of(output) + off;
      if (len <= kWholeReduceBytes) {
        std::memcpy(slot(set, rank_), in, len);
        barrier("all_reduce");
        for (int64_t m = 0; m < size_; ++m) {
          sources[m] = slot(set, m);
        }
        reduce_into(out, sources, static_cast<int64_t>(len / element), dtype, op);
        continue;
      }
      // Member i reduces slice i. It publishes only the slices the others reduce, reads its own
      // from its input, writes its reduced slice to its output and to the result slot, and after
      // the second barrier copies the others' reduced slices out: about 4.5 bytes of memory
      // traffic per byte reduced for two members, against 5.5 when every member publishes all.
      const size_t count = len / element;
      const auto lo = [&](int64_t m) { return count * m / size_ * element; };
      for (int64_t m = 0; m < size_; ++m) {
        if (m != rank_) {
          std::memcpy(slot(set, rank_) + lo(m), in + lo(m), lo(m + 1) - lo(m));
        }
      }
      barrier("all_reduce");
      const size_t mine = lo(rank_);
      const size_t mine_bytes = lo(rank_ + 1) - mine;
      for (int64_t m = 0; m < size_; ++m) {
        sources[m] = m == rank_ ? in + mine : slot(set, m) + mine;
      }
      reduce_into(out + mine, sources, static_cast<int64_t>(mine_bytes / element), dtype, op);
      std::memcpy(result_slot(set) + mine, out + mine, mine_bytes);
      barrier("all_reduce");
      for (int64_t m = 0; m < size_; ++m) {
        if (m != rank_) {
          std::memcpy(out + lo(m), result_slot(set) + lo(m), lo(m + 1) - lo(m));
        }
      }
    }
  }

  // Whether every peer has issued collective `number`, waiting briefly (spinning, then yielding,
  // at least `patience`) for those that have not yet: peers usually arrive within microseconds
  // of each other.
  bool peers_issued(uint64_t number, std::chrono::nanoseconds patience) const {
    const auto all_issued = [&] {
      for (int64_t m = 0; m < size_; ++m) {
        if (m != rank_ && control(m).issued.load(std::memory_order_acquire) < number) {
          return false;
        }
      }
      return true;
    };
    for (int i = 0; i < kSpins; ++i) {
      if (all_issued()) {
        return true;
      }
      cpu_relax();
    }
    const auto deadline = Clock::now() + patience;
    for (int i = 0; i < kYields || Clock::now() < deadline; ++i) {
      if (all_issued()) {
        return true;
      }
      std::this_thread::yield();
    }
    return all_issued();
  }

  // This member's turn to issue a collective of `bytes`: numbered and published, and whether it
  // runs inside the call: small, nothing queued, and every peer has issued it too (so the call
  // cannot wait on a peer's caller). The lock, held until `submit`, keeps a collective issued
  // meanwhile by another thread from overtaking this one.
  struct Turn {
    std::unique_lock<std::mutex> lock;
    const char* op;
    bool in_call;
    // Nothing queued and every peer has issued it: a large collective may do inside the call
    // the part that reads its input (see all_to_all), without blocking on a peer's caller.
    bool peers_ready;
  };

  // `splits`: a large collective that can do the part that reads its input inside the call
  // waits up to what a copy of that input would take for its peers to issue it too.
  Turn take_turn(const char* op, size_t bytes, bool splits = false) {
    if (auto failed = failure()) {
      TORCH_CHECK(false, "c10d_func.", op, ": the shm communicator failed earlier: ", *failed);
    }
    std::unique_lock<std::mutex> lock = queue_->lock();
    const uint64_t number = ++issued_;
    control(rank_).issued.store(number, std::memory_order_release);
    // One ordered caller cannot meet its peers in another order: every collective runs in the
    // call. Otherwise a small one does, once every peer has issued it too.
    if (!queue_->idle()) {
      return Turn{std::move(lock), op, false, false};
    }
    if (one_ordered_caller_) {
      return Turn{std::move(lock), op, true, true};
    }
    const bool small = bytes <= kInlineBytes;
    const bool ready = (small || splits) &&
                       peers_issued(number, small ? std::chrono::nanoseconds(0) : copy_time(bytes));
    return Turn{std::move(lock), op, small && ready, ready};
  }

  // About what copying `bytes` of private memory takes (at 8 GB/s): how long a collective that
  // would otherwise copy its input waits for its peers instead.
  static std::chrono::nanoseconds copy_time(size_t bytes) {
    return std::chrono::nanoseconds(bytes / 8);
  }

  // What a queued collective may read of `input`: where the caller may write it as soon as the
  // op returns (InputsReusedOnReturn), a copy (in the pool when large, so the others read it
  // in place); the input itself when the collective runs in the call or the caller keeps it
  // untouched until the wait.
  at::Tensor kept(const Turn& turn, const at::Tensor& input) {
    if (turn.in_call || !InputsReusedOnReturn::active()) {
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
    if (turn.in_call || !InputsReusedOnReturn::active() || nbytes(input) <= kInlineBytes ||
        !output.is_contiguous() || !input.is_contiguous()) {
      return kept(turn, input);
    }
    at::Tensor own = output.view(-1).narrow(0, rank_ * input.numel(), input.numel());
    stream_copy(own.data_ptr(), input.data_ptr(), nbytes(input), streaming(nbytes(input)));
    return own.view(input.sizes());
  }

  // Runs `work` inside the call, or queues it for the progress thread (or the thread that waits
  // it, task_queue.h), as `turn` decided; either way in issue order.
  Completion submit(Turn turn, std::function<void()> work) {
    work = profiled(std::move(work));
    if (turn.in_call) {
      queue_->run_here(std::move(turn.lock), work);
      return completed();
    }
    return queue_->push(std::move(turn.lock), [this, work = std::move(work)] {
      if (auto failed = failure()) {
        TORCH_CHECK(false, "the shm communicator failed earlier: ", *failed);
      }
      work();
    });
  }

  // Runs inside the call the part of a collective that `first` does (all that reads the
  // caller's input) and queues the rest it returns, as the next collective. Both parts are
  // profiled under the collective's name (issued on this thread).
  Completion submit_split(Turn turn, std::function<std::function<void()>()> first) {
    auto rest = std::make_shared<std::function<void()>>();
    std::function<void()> start = profiled([first = std::move(first), rest] { *rest = first(); });
    return queue_->run_here_then_push(
        std::move(turn.lock), [this, start = std::move(start), rest]() -> std::function<void()> {
          start();
          if (!*rest) {
            return nullptr;
          }
          return [this, finish = profiled(std::move(*rest))] {
            if (auto failed = failure()) {
              TORCH_CHECK(false, "the shm communicator failed earlier: ", *failed);
            }
            finish();
          };
        });
  }

  void on_failed(const std::string& reason) override { sync_.publish_failure(reason); }

  std::shared_ptr<SharedSegment> segment_;  // shared with the pool: blocks outlive this
  int64_t rank_;
  int64_t size_;
  bool one_ordered_caller_;  // Rendezvous::one_ordered_caller
  size_t chunk_ = 0;
  size_t region_bytes_ = 0;
  bool cross_memory_ = false;  // private tensors are reached with process_vm_readv/writev
  char* data_ = nullptr;
  std::shared_ptr<SymmetricPool> pool_;

  // Touched only by the thread running collectives (one at a time, in issue order).
  shm::Members sync_;
  std::unique_ptr<DirectCollectives> direct_;
  uint64_t sets_used_ = 0;

  std::shared_ptr<TaskQueue> queue_ = TaskQueue::create();
  uint64_t issued_ = 0;  // under the queue's lock: collectives issued, as in our control block
};

}  // namespace

std::shared_ptr<Communicator> shm::communicator_on(SharedSegment segment,
                                                   const Rendezvous& rendezvous,
                                                   bool cross_memory) {
  return std::make_shared<ShmCommunicator>(std::move(segment), rendezvous, cross_memory);
}

}  // namespace c10d_func
