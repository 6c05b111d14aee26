// The collectives through the slots; see shm_slots.h.
#include "transports/shm/shm_slots.h"

#include "transports/byte_reduce.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/shm_layout.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace c10d_func::shm {

void Slots::reduce_all(const at::Tensor& output, const at::Tensor& input, ReduceOp op,
                       ReduceOp asked) {
  const auto dtype = output.scalar_type();
  const size_t element = output.element_size();
  const size_t total = nbytes(output);
  sync_.begin(OpCode::kAllReduce,
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
      sync_.barrier("all_reduce");
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
    sync_.barrier("all_reduce");
    const size_t mine = lo(rank_);
    const size_t mine_bytes = lo(rank_ + 1) - mine;
    for (int64_t m = 0; m < size_; ++m) {
      sources[m] = m == rank_ ? in + mine : slot(set, m) + mine;
    }
    reduce_into(out + mine, sources, static_cast<int64_t>(mine_bytes / element), dtype, op);
    std::memcpy(result_slot(set) + mine, out + mine, mine_bytes);
    sync_.barrier("all_reduce");
    for (int64_t m = 0; m < size_; ++m) {
      if (m != rank_) {
        std::memcpy(out + lo(m), result_slot(set) + lo(m), lo(m + 1) - lo(m));
      }
    }
  }
}

void Slots::check_pairs(int set) const {
  // Read once into private memory, each bounded, then every pair compared by every member, so
  // all fail together: the slots carry no sizes of their own, and a receiver expecting another
  // size than its sender sends would read stale bytes (or leave some unread) without a word.
  std::vector<uint64_t> sizes(static_cast<size_t>(2 * size_ * size_));
  for (int64_t m = 0; m < size_; ++m) {
    std::memcpy(sizes.data() + 2 * size_ * m, slot(set, m), 2 * size_ * sizeof(uint64_t));
  }
  const auto sends = [&](int64_t from, int64_t to) { return sizes[2 * size_ * from + to]; };
  const auto expects = [&](int64_t to, int64_t from) {
    return sizes[2 * size_ * to + size_ + from];
  };
  for (int64_t from = 0; from < size_; ++from) {
    for (int64_t to = 0; to < size_; ++to) {
      for (const uint64_t value : {sends(from, to), expects(from, to)}) {
        const std::string wrong = check_count(static_cast<int64_t>(value), kMaxSplitBytes);
        if (!wrong.empty()) {
          sync_.fail("all_to_all", sync_.name_of(from) + " published a bad split length: " + wrong +
                                       " (a corrupted or version-skewed peer)");
        }
      }
    }
  }
  const std::string unpaired =
      unpaired_splits(size_, sends, expects, [&](int64_t member) { return sync_.name_of(member); });
  if (!unpaired.empty()) {
    sync_.fail("all_to_all", unpaired);
  }
}

void Slots::all_to_all(const at::Tensor& output, const at::Tensor& input, size_t row,
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
  sync_.begin(OpCode::kAllToAll, 0);
  // Members know only their own sends and receives: agree on the number of rounds, and show
  // every member what each sends and expects (in this member's slot of a set of its own).
  const int sizes_set = next_set();
  auto* const shown = reinterpret_cast<uint64_t*>(slot(sizes_set, rank_));
  for (int64_t m = 0; m < size_; ++m) {
    shown[m] = send[m];
    shown[size_ + m] = recv[m];
  }
  const int parity = sync_.parity();
  // A member's rounds cover at most 256 TiB in pieces: a larger count is not a real one.
  const uint64_t most_rounds = (uint64_t{1} << 48) / piece;
  int64_t published = static_cast<int64_t>(rounds);
  if (corrupts_for_test(ShmFault::kRounds, rank_)) {
    published = INT64_MAX;
  } else if (corrupts_for_test(ShmFault::kManyRounds, rank_)) {
    published = static_cast<int64_t>(most_rounds);
  }
  sync_.control(rank_).value[parity].store(published, std::memory_order_relaxed);
  sync_.barrier("all_to_all");
  for (int64_t m = 0; m < size_; ++m) {
    const int64_t theirs = sync_.control(m).value[parity].load(std::memory_order_relaxed);
    const std::string wrong = check_count(theirs, most_rounds);
    if (!wrong.empty()) {
      sync_.fail("all_to_all", sync_.name_of(m) + " published a bad number of rounds: " + wrong +
                                   " (a corrupted or version-skewed peer)");
    }
    rounds = std::max(rounds, static_cast<size_t>(theirs));
  }
  check_pairs(sizes_set);
  // What a member sends itself is copied directly, not through the segment.
  std::memcpy(bytes_of(output) + recv_at[rank_], bytes_of(input) + send_at[rank_], send[rank_]);
  const auto began = std::chrono::steady_clock::now();
  for (size_t round = 0; round < rounds; ++round) {
    sync_.check_within_timeout("all_to_all", began);
    const size_t off = round * piece;
    const int set = next_set();
    for (int64_t m = 0; m < size_; ++m) {
      if (m != rank_ && off < send[m]) {
        std::memcpy(slot(set, rank_) + m * piece, bytes_of(input) + send_at[m] + off,
                    std::min(piece, send[m] - off));
      }
    }
    sync_.barrier("all_to_all");
    for (int64_t m = 0; m < size_; ++m) {
      if (m != rank_ && off < recv[m]) {
        std::memcpy(bytes_of(output) + recv_at[m] + off, slot(set, m) + rank_ * piece,
                    std::min(piece, recv[m] - off));
      }
    }
  }
}

}  // namespace c10d_func::shm
