// See shm_direct.h.
#include "transports/shm/shm_direct.h"

#include <ATen/ATen.h>

#include "transports/shm/shm_reduce.h"
#include "transports/shm/stream_copy.h"

#include <cstring>

namespace c10d_func::shm {
namespace {

// Reductions run over pieces that stay in cache between the reduction and the copies to the
// other members' outputs.
constexpr size_t kPieceBytes = size_t{256} << 10;

bool everyone(int64_t) {
  return true;
}

bool nobody(int64_t) {
  return false;
}

void divide_piece(char* data, int64_t count, c10::ScalarType dtype, int64_t members) {
  at::Tensor piece = at::from_blob(data, {count}, at::TensorOptions().dtype(dtype));
  if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
    piece.div_(members, "trunc");  // as NCCL, and as the slots' staging
  } else {
    piece.div_(members);
  }
}

}  // namespace

int64_t DirectCollectives::place(const at::Tensor& tensor, at::Tensor& staged, bool copy) {
  const size_t bytes = nbytes(tensor);
  if (bytes == 0) {
    return 0;
  }
  if (auto offset = pool_->offset_in_segment(tensor)) {
    return static_cast<int64_t>(*offset);
  }
  auto block = pool_->allocate({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte),
                               /*user_owned=*/false);
  if (!block) {
    return -1;
  }
  if (copy) {
    stream_copy(block->data_ptr(), tensor.data_ptr(), bytes, streaming(bytes));
  }
  staged = *block;
  return static_cast<int64_t>(*pool_->offset_in_segment(staged));
}

template <typename InputNeeded, typename OutputNeeded>
bool DirectCollectives::agree(const char* op, OpCode code, uint64_t detail, int64_t input_at,
                              int64_t output_at, InputNeeded input_needed,
                              OutputNeeded output_needed) {
  members_.begin(code, detail);
  MemberControl& me = members_.control(members_.rank());
  me.exposed_input.store(input_at, std::memory_order_relaxed);
  me.exposed_output.store(output_at, std::memory_order_relaxed);
  members_.barrier(op);  // publishes the stores above (release/acquire on the arrival step)
  for (int64_t m = 0; m < members_.size(); ++m) {
    const MemberControl& peer = members_.control(m);
    if ((input_needed(m) && peer.exposed_input.load(std::memory_order_relaxed) < 0) ||
        (output_needed(m) && peer.exposed_output.load(std::memory_order_relaxed) < 0)) {
      return false;  // every member reads the same offsets, so every member returns here
    }
  }
  return true;
}

const char* DirectCollectives::input_of(int64_t member) const {
  return pool_->base() + members_.control(member).exposed_input.load(std::memory_order_relaxed);
}

char* DirectCollectives::output_of(int64_t member) const {
  return pool_->base() + members_.control(member).exposed_output.load(std::memory_order_relaxed);
}

bool DirectCollectives::all_reduce(const at::Tensor& output, const at::Tensor& input, ReduceOp op,
                                   ReduceOp asked, bool divide) {
  const auto dtype = output.scalar_type();
  const size_t element = output.element_size();
  const size_t total = nbytes(output);
  const bool in_place = input.data_ptr() == output.data_ptr();
  at::Tensor staged_input, staged_output;
  const int64_t input_at = place(input, staged_input, /*copy=*/true);
  const int64_t output_at = in_place ? input_at : place(output, staged_output, /*copy=*/false);
  const uint64_t detail =
      (total * 131 + static_cast<uint64_t>(dtype)) * 31 + static_cast<uint64_t>(asked);
  if (!agree("all_reduce", OpCode::kAllReduce, detail, input_at, output_at, everyone, everyone)) {
    return false;
  }
  // Member i reduces the i-th slice of every input and writes it into every output: a slice is
  // read and written by one member only, so an in-place reduction is safe piece by piece.
  const int64_t n = members_.size();
  const int64_t rank = members_.rank();
  const size_t count = total / element;
  const size_t begin = count * rank / n * element;
  const size_t end = count * (rank + 1) / n * element;
  const size_t piece = std::max(element, kPieceBytes / element * element);
  std::vector<const char*> sources(n);
  // Each piece is reduced into a buffer that stays in cache, then streamed to every output.
  const bool streams = streaming(total);
  static thread_local std::vector<char> scratch;
  scratch.resize(piece);
  char* reduced = scratch.data();
  for (size_t off = begin; off < end; off += piece) {
    const size_t len = std::min(piece, end - off);
    for (int64_t m = 0; m < n; ++m) {
      sources[m] = input_of(m) + off;
    }
    reduce_into(reduced, sources, static_cast<int64_t>(len / element), dtype, op);
    if (divide) {
      divide_piece(reduced, static_cast<int64_t>(len / element), dtype, n);
    }
    for (int64_t m = 0; m < n; ++m) {
      stream_copy(output_of(m) + off, reduced, len, streams);
    }
  }
  members_.barrier("all_reduce");
  const at::Tensor& result = in_place ? staged_input : staged_output;
  if (result.defined()) {  // the output lies outside the segment: copy the result out
    stream_copy(output.data_ptr(), result.data_ptr(), total, streams);
  }
  return true;
}

bool DirectCollectives::all_gather(const at::Tensor& output, const at::Tensor& input) {
  const size_t total = nbytes(input);
  at::Tensor staged;
  const int64_t input_at = place(input, staged, /*copy=*/true);
  if (!agree("all_gather", OpCode::kAllGather, total, input_at, 0, everyone, nobody)) {
    return false;
  }
  const bool streams = streaming(total * members_.size());
  for (int64_t m = 0; m < members_.size(); ++m) {
    const char* from = m == members_.rank() ? bytes_of(input) : input_of(m);
    char* to = bytes_of(output) + m * total;
    if (from != to) {  // the input may already be in its place (sent from its own block)
      stream_copy(to, from, total, streams);
    }
  }
  members_.barrier("all_gather");  // the others are done reading this member's input
  return true;
}

bool DirectCollectives::reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                                       ReduceOp op, ReduceOp asked) {
  const auto dtype = output.scalar_type();
  const size_t element = output.element_size();
  const size_t block = nbytes(output);  // each member's share
  at::Tensor staged;
  const int64_t input_at = place(input, staged, /*copy=*/true);
  const uint64_t detail =
      (block * 131 + static_cast<uint64_t>(dtype)) * 31 + static_cast<uint64_t>(asked);
  if (!agree("reduce_scatter", OpCode::kReduceScatter, detail, input_at, 0, everyone, nobody)) {
    return false;
  }
  const int64_t n = members_.size();
  const size_t mine = static_cast<size_t>(members_.rank()) * block;
  const size_t piece = std::max(element, kPieceBytes / element * element);
  std::vector<const char*> sources(n);
  for (size_t off = 0; off < block; off += piece) {
    const size_t len = std::min(piece, block - off);
    for (int64_t m = 0; m < n; ++m) {
      sources[m] = input_of(m) + mine + off;
    }
    reduce_into(bytes_of(output) + off, sources, static_cast<int64_t>(len / element), dtype, op);
  }
  members_.barrier("reduce_scatter");
  return true;
}

bool DirectCollectives::all_to_all(const at::Tensor& output, const at::Tensor& input,
                                   const std::vector<size_t>& send,
                                   const std::vector<size_t>& receive) {
  const int64_t n = members_.size();
  const int64_t rank = members_.rank();
  at::Tensor staged;
  const int64_t input_at = place(input, staged, /*copy=*/true);
  auto* directory = reinterpret_cast<int64_t*>(pool_->base() + directory_offset(n));
  const auto entry = [&](int64_t member, int64_t peer) {
    return directory + (member * n + peer) * kDirectoryFields;
  };
  for (int64_t m = 0, at = 0; m < n; ++m) {
    entry(rank, m)[0] = at;
    entry(rank, m)[1] = static_cast<int64_t>(send[m]);
    entry(rank, m)[2] = static_cast<int64_t>(receive[m]);
    at += static_cast<int64_t>(send[m]);
  }
  if (!agree("all_to_all", OpCode::kAllToAll, 0, input_at, 0, everyone, nobody)) {
    return false;
  }
  // Every member checks every pair, so a mismatch fails on all members alike instead of leaving
  // the ones that did not see it waiting.
  for (int64_t from = 0; from < n; ++from) {
    for (int64_t to = 0; to < n; ++to) {
      if (entry(from, to)[1] != entry(to, from)[2]) {
        members_.fail("all_to_all",
                      "split sizes disagree: " + members_.name_of(from) + " sends " +
                          std::to_string(entry(from, to)[1]) + " bytes to " + members_.name_of(to) +
                          ", which expects " + std::to_string(entry(to, from)[2]) +
                          " (output_split_sizes on one member must match input_split_sizes on "
                          "the others)");
      }
    }
  }
  const bool streams = streaming(nbytes(output));
  for (int64_t m = 0, at = 0; m < n; ++m) {
    const char* from =
        (m == rank ? static_cast<const char*>(bytes_of(input)) : input_of(m)) + entry(m, rank)[0];
    stream_copy(bytes_of(output) + at, from, receive[m], streams);
    at += static_cast<int64_t>(receive[m]);
  }
  members_.barrier("all_to_all");
  return true;
}

bool DirectCollectives::broadcast(const at::Tensor& output, const at::Tensor& input, int64_t root) {
  const size_t total = nbytes(output);
  const bool is_root = members_.rank() == root;
  at::Tensor staged;
  const int64_t input_at = is_root ? place(input, staged, /*copy=*/true) : 0;
  const auto root_only = [root](int64_t m) { return m == root; };
  if (!agree("broadcast", OpCode::kBroadcast, total * 131 + static_cast<uint64_t>(root), input_at,
             0, root_only, nobody)) {
    return false;
  }
  if (!is_root) {
    stream_copy(bytes_of(output), input_of(root), total, streaming(total));
  } else if (input.data_ptr() != output.data_ptr()) {
    stream_copy(bytes_of(output), bytes_of(input), total, streaming(total));
  }
  members_.barrier("broadcast");
  return true;
}

bool DirectCollectives::gather(const at::Tensor& output, const at::Tensor& input, int64_t root) {
  const size_t total = nbytes(input);
  at::Tensor staged;
  const int64_t input_at = place(input, staged, /*copy=*/true);
  if (!agree("gather", OpCode::kGather, total * 131 + static_cast<uint64_t>(root), input_at, 0,
             everyone, nobody)) {
    return false;
  }
  if (members_.rank() == root) {
    for (int64_t m = 0; m < members_.size(); ++m) {
      const char* from = m == root ? bytes_of(input) : input_of(m);
      stream_copy(bytes_of(output) + m * total, from, total, streaming(total * members_.size()));
    }
  }
  members_.barrier("gather");
  return true;
}

bool DirectCollectives::scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) {
  const size_t total = nbytes(output);
  const bool is_root = members_.rank() == root;
  at::Tensor staged;
  const int64_t input_at = is_root ? place(input, staged, /*copy=*/true) : 0;
  const auto root_only = [root](int64_t m) { return m == root; };
  if (!agree("scatter", OpCode::kScatter, total * 131 + static_cast<uint64_t>(root), input_at, 0,
             root_only, nobody)) {
    return false;
  }
  const char* from = is_root ? bytes_of(input) : input_of(root);
  stream_copy(bytes_of(output), from + members_.rank() * total, total, streaming(total));
  members_.barrier("scatter");
  return true;
}

}  // namespace c10d_func::shm
