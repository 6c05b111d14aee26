// See shm_direct.h: the collectives; how a member reaches its peers' tensors is in
// shm_direct_access.cpp.
#include "transports/shm/shm_direct.h"

#include <ATen/ATen.h>

#include "transports/byte_reduce.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/stream_copy.h"

#include <string>

namespace c10d_func::shm {
namespace {

// Reductions run over pieces that stay in cache between the reduction and the copies to the
// other members' outputs.
constexpr size_t kPieceBytes = size_t{256} << 10;
// A pipelined copy (broadcast) takes at most this many steps.
constexpr size_t kMaxPieces = 64;

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

// A cache-sized buffer per member, per thread running collectives.
char* scratch_for(int64_t member, size_t bytes) {
  static thread_local std::vector<std::vector<char>> buffers;
  if (buffers.size() <= static_cast<size_t>(member)) {
    buffers.resize(member + 1);
  }
  buffers[member].resize(std::max(buffers[member].size(), bytes));
  return buffers[member].data();
}

}  // namespace

template <typename InputNeeded, typename OutputNeeded>
bool DirectCollectives::agree(const char* op, OpCode code, uint64_t detail, Placement input,
                              Placement output, InputNeeded input_needed,
                              OutputNeeded output_needed, uint64_t input_bytes,
                              uint64_t output_bytes) {
  members_.begin(code, detail);
  MemberControl& me = members_.control(members_.rank());
  me.exposed_input.store(input.offset, std::memory_order_relaxed);
  me.input_address.store(input.address, std::memory_order_relaxed);
  me.exposed_output.store(output.offset, std::memory_order_relaxed);
  me.output_address.store(output.address, std::memory_order_relaxed);
  if (corrupts_for_test(ShmFault::kPlacement, members_.rank())) {
    me.exposed_input.store(16, std::memory_order_relaxed);  // inside the segment's header
    me.exposed_output.store(16, std::memory_order_relaxed);
  }
  members_.barrier(op);  // publishes the stores above (release/acquire on the arrival step)
  // Each member's placements, read from the segment once: what is checked below is what the
  // collective uses (a peer could write them again after the check).
  const int64_t n = members_.size();
  inputs_.resize(n);
  outputs_.resize(n);
  for (int64_t m = 0; m < n; ++m) {
    const MemberControl& peer = members_.control(m);
    inputs_[m] = {peer.exposed_input.load(std::memory_order_relaxed),
                  peer.input_address.load(std::memory_order_relaxed)};
    outputs_[m] = {peer.exposed_output.load(std::memory_order_relaxed),
                   peer.output_address.load(std::memory_order_relaxed)};
  }
  for (int64_t m = 0; m < n; ++m) {
    if ((input_needed(m) && inputs_[m].offset == kUnplaced) ||
        (output_needed(m) && outputs_[m].offset == kUnplaced)) {
      return false;  // every member reads the same placements, so every member returns here
    }
  }
  // Checked before anything is read or written there (every member checks every member, so a
  // bad value fails all of them alike).
  for (int64_t m = 0; m < n; ++m) {
    if (input_needed(m) && input_bytes > 0) {
      check_placed(op, m, inputs_[m].offset, input_bytes, "input");
    }
    if (output_needed(m) && output_bytes > 0) {
      check_placed(op, m, outputs_[m].offset, output_bytes, "output");
    }
  }
  if (injects_for_test(ShmFault::kRewrite)) {
    members_.barrier(op);  // every member has checked
    if (corrupts_for_test(ShmFault::kRewrite, members_.rank())) {
      me.exposed_input.store(16, std::memory_order_relaxed);  // inside the segment's header
      me.exposed_output.store(16, std::memory_order_relaxed);
    }
  }
  return true;
}

bool DirectCollectives::all_reduce(const at::Tensor& output, const at::Tensor& input, ReduceOp op,
                                   ReduceOp asked, bool divide) {
  const auto dtype = output.scalar_type();
  const size_t element = output.element_size();
  const size_t total = nbytes(output);
  const bool in_place = input.data_ptr() == output.data_ptr();
  const auto attach_ends = attach_ends_on_return();
  // Member i reduces the i-th slice of every input and writes it into every output: a slice is
  // read and written by one member only, so an in-place reduction is safe piece by piece.
  const int64_t n = members_.size();
  const int64_t rank = members_.rank();
  const size_t count = total / element;
  const size_t begin = count * rank / n * element;
  const size_t end = count * (rank + 1) / n * element;
  const size_t piece = std::max(element, kPieceBytes / element * element);
  const bool streams = streaming(total);
  at::Tensor staged_input, staged_output;
  const Placement input_at = place_for_peers(input, staged_input, begin, end);
  const Placement output_at = in_place ? input_at : place(output, staged_output, /*copy=*/false);
  const uint64_t detail =
      (total * 131 + static_cast<uint64_t>(dtype)) * 31 + static_cast<uint64_t>(asked);
  if (!agree("all_reduce", OpCode::kAllReduce, detail, input_at, output_at, everyone, everyone,
             total, total)) {
    return false;
  }
  // This member's own tensors are used where they are (a staged copy is for the peers).
  const char* my_input = bytes_of(input);
  const at::Tensor& my_result = in_place ? staged_input : staged_output;
  char* my_output = bytes_of(my_result.defined() ? my_result : output);
  // An output outside the segment (staged for the peers to write into) receives this member's
  // own slice straight from the reduction, and only the others' slices are copied out of the
  // staged block after the barrier: the peers read the staged input, never the output.
  const bool reduce_into_output = my_result.defined();
  std::vector<const char*> sources(n);
  char* scratch = scratch_for(n, piece);  // the slots 0..n-1 hold attached inputs
  for (size_t off = begin; off < end; off += piece) {
    const size_t len = std::min(piece, end - off);
    for (int64_t m = 0; m < n; ++m) {
      sources[m] = m == rank ? my_input + off
                             : input_piece("all_reduce", m, off, len, scratch_for(m, piece));
    }
    char* reduced = reduce_into_output ? bytes_of(output) + off : scratch;
    reduce_into(reduced, sources, static_cast<int64_t>(len / element), dtype, op);
    if (divide) {
      divide_piece(reduced, static_cast<int64_t>(len / element), dtype, n);
    }
    for (int64_t m = 0; m < n; ++m) {
      if (m != rank) {
        write_output("all_reduce", m, off, reduced, len, streams);
      } else if (!reduce_into_output) {
        stream_copy(my_output + off, reduced, len, streams);
      }
    }
  }
  members_.barrier("all_reduce");
  if (reduce_into_output) {  // the others' slices, from the staged block the peers wrote
    stream_copy_outside(output.data_ptr(), my_result.data_ptr(), total, begin, end, streams);
  }
  return true;
}

bool DirectCollectives::all_gather(const at::Tensor& output, const at::Tensor& input) {
  const size_t total = nbytes(input);
  const auto attach_ends = attach_ends_on_return();
  at::Tensor staged;
  const Placement input_at = place(input, staged, /*copy=*/true);
  if (!agree("all_gather", OpCode::kAllGather, total, input_at, {}, everyone, nobody, total, 0)) {
    return false;
  }
  const bool streams = streaming(total * members_.size());
  for (int64_t m = 0; m < members_.size(); ++m) {
    char* to = bytes_of(output) + m * total;
    if (m != members_.rank()) {
      read_input("all_gather", m, 0, to, total, streams);
    } else if (to != bytes_of(input)) {  // the input may already be in its place
      stream_copy(to, bytes_of(input), total, streams);
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
  const auto attach_ends = attach_ends_on_return();
  const int64_t n = members_.size();
  const int64_t rank = members_.rank();
  const size_t mine = static_cast<size_t>(rank) * block;
  at::Tensor staged;
  const Placement input_at = place_for_peers(input, staged, mine, mine + block);
  const uint64_t detail =
      (block * 131 + static_cast<uint64_t>(dtype)) * 31 + static_cast<uint64_t>(asked);
  if (!agree("reduce_scatter", OpCode::kReduceScatter, detail, input_at, {}, everyone, nobody,
             block * static_cast<uint64_t>(members_.size()), 0)) {
    return false;
  }
  const size_t piece = std::max(element, kPieceBytes / element * element);
  std::vector<const char*> sources(n);
  for (size_t off = 0; off < block; off += piece) {
    const size_t len = std::min(piece, block - off);
    for (int64_t m = 0; m < n; ++m) {
      sources[m] = m == rank
                       ? bytes_of(input) + mine + off
                       : input_piece("reduce_scatter", m, mine + off, len, scratch_for(m, piece));
    }
    reduce_into(bytes_of(output) + off, sources, static_cast<int64_t>(len / element), dtype, op);
  }
  members_.barrier("reduce_scatter");
  return true;
}

bool DirectCollectives::all_to_all(const at::Tensor& output, const at::Tensor& input,
                                   const std::vector<size_t>& send,
                                   const std::vector<size_t>& receive, Unfinished* unfinished) {
  const int64_t n = members_.size();
  const int64_t rank = members_.rank();
  const auto attach_ends = attach_ends_on_return();
  at::Tensor staged;
  const Placement output_at = place(output, staged, /*copy=*/false);
  auto* directory = reinterpret_cast<int64_t*>(pool_->base() + directory_offset(n));
  const auto entry = [&](int64_t member, int64_t peer) {
    return directory + (member * n + peer) * kDirectoryFields;
  };
  for (int64_t m = 0, at = 0; m < n; ++m) {
    entry(rank, m)[0] = at;  // where member m's piece lands in this member's output (for dumps)
    entry(rank, m)[1] = static_cast<int64_t>(send[m]);
    entry(rank, m)[2] = static_cast<int64_t>(receive[m]);
    at += static_cast<int64_t>(receive[m]);
  }
  if (corrupts_for_test(ShmFault::kSplit, rank)) {
    entry(rank, 0)[2] = -5;
  }
  if (!agree("all_to_all", OpCode::kAllToAll, 0, {}, output_at, nobody, everyone, 0, 0)) {
    return false;
  }
  // The directory, read from the segment once: what is checked below is what places the
  // pieces (a peer could write its entries again after the check).
  directory_.assign(directory, directory + n * n * kDirectoryFields);
  if (injects_for_test(ShmFault::kRewrite)) {
    members_.barrier("all_to_all");  // every member has read the directory
    if (corrupts_for_test(ShmFault::kRewrite, rank)) {
      for (int64_t m = 0; m < n; ++m) {
        entry(rank, m)[1] = entry(rank, m)[2] = 1;
      }
    }
  }
  const auto checked = [&](int64_t member, int64_t peer) {
    return directory_.data() + (member * n + peer) * kDirectoryFields;
  };
  // Every member checks every value and every pair, so a bad one fails on all members alike
  // instead of leaving the ones that did not see it waiting; then each receiver's output must
  // hold all it receives, before anything is written there.
  for (int64_t from = 0; from < n; ++from) {
    for (int64_t to = 0; to < n; ++to) {
      for (size_t field = 0; field < kDirectoryFields; ++field) {
        const std::string wrong = check_count(checked(from, to)[field], kMaxSplitBytes);
        if (!wrong.empty()) {
          members_.fail("all_to_all", members_.name_of(from) +
                                          " published a bad split length in the directory: " +
                                          wrong + " (a corrupted or version-skewed peer)");
        }
      }
    }
  }
  const std::string unpaired = unpaired_splits(
      n, [&](int64_t from, int64_t to) { return checked(from, to)[1]; },
      [&](int64_t to, int64_t from) { return checked(to, from)[2]; },
      [&](int64_t member) { return members_.name_of(member); });
  if (!unpaired.empty()) {
    members_.fail("all_to_all", unpaired);
  }
  for (int64_t m = 0; m < n; ++m) {
    uint64_t receives = 0;  // at most n * kMaxSplitBytes: no overflow
    for (int64_t k = 0; k < n; ++k) {
      receives += static_cast<uint64_t>(checked(m, k)[2]);
    }
    if (receives > 0) {
      check_placed("all_to_all", m, outputs_[m].offset, receives, "output");
    }
  }
  for (int64_t m = 0; m < n; ++m) {
    // This member's own entries as read back, against what it wrote: its writes below follow
    // `send`, which the pairs checked above then cover.
    if (checked(rank, m)[1] != static_cast<int64_t>(send[m]) ||
        checked(rank, m)[2] != static_cast<int64_t>(receive[m])) {
      members_.fail("all_to_all",
                    "this member's entries in the directory were overwritten "
                    "before it read them back (memory overwritten by another "
                    "process)");
    }
  }
  // Each member writes its pieces straight into the receivers' outputs: nobody reads another
  // member's input, so an input needs no copy where the others can read it.
  char* mine = bytes_of(staged.defined() ? staged : output);
  const bool streams = streaming(nbytes(input));
  for (int64_t m = 0, at = 0; m < n; ++m) {
    const char* piece = bytes_of(input) + at;
    size_t lands_at = 0;  // after what member m receives from the members before this one
    for (int64_t k = 0; k < rank; ++k) {
      lands_at += static_cast<size_t>(checked(m, k)[2]);
    }
    if (m == rank) {
      stream_copy(mine + lands_at, piece, send[m], streams);
    } else if (send[m] > 0) {
      write_output("all_to_all", m, lands_at, piece, send[m], streams);
    }
    at += static_cast<int64_t>(send[m]);
  }
  Unfinished rest{"all_to_all", output, staged};
  rest.attach = std::move(attach_);
  if (unfinished != nullptr) {
    *unfinished = std::move(rest);
  } else {
    finish(rest);
  }
  return true;
}

void DirectCollectives::finish(const Unfinished& unfinished) {
  members_.barrier(unfinished.op);    // every member has written what it sends
  if (unfinished.staged.defined()) {  // the output lies outside the segment: copy it out
    stream_copy(unfinished.output.data_ptr(), unfinished.staged.data_ptr(),
                nbytes(unfinished.output), streaming(nbytes(unfinished.output)));
  }
}

bool DirectCollectives::broadcast(const at::Tensor& output, const at::Tensor& input, int64_t root,
                                  Unfinished* unfinished) {
  const size_t total = nbytes(output);
  const bool is_root = members_.rank() == root;
  const bool streams = streaming(total);
  const auto attach_ends = attach_ends_on_return();
  // Where the others read the root's data: its input where they can read it in place, else its
  // output when that is in the segment, else a block of its pool. The root fills the last two
  // piece by piece, and the others copy each piece as soon as it is there.
  at::Tensor staged;
  Placement source;
  const char* fill_from = nullptr;  // what the root copies into `fill`, piece by piece
  char* fill = nullptr;
  if (is_root) {
    if (pool_->offset_in_segment(input)) {
      source = place(input, staged, /*copy=*/false);
    } else if (auto offset = pool_->offset_in_segment(output)) {
      source = {static_cast<int64_t>(*offset), 0};
      fill = input.data_ptr() == output.data_ptr() ? nullptr : bytes_of(output);
    } else {
      source = place(input, staged, /*copy=*/false);
      fill = staged.defined() ? bytes_of(staged) : nullptr;
    }
    fill_from = bytes_of(input);
  }
  const auto root_only = [root](int64_t m) { return m == root; };
  if (!agree("broadcast", OpCode::kBroadcast, total * 131 + static_cast<uint64_t>(root), source, {},
             root_only, nobody, total, 0)) {
    return false;
  }
  const size_t piece = round_up(std::max(kPieceBytes, total / kMaxPieces), kAlign);
  for (size_t off = 0; off < total; off += piece) {
    const size_t len = std::min(piece, total - off);
    if (!is_root) {
      members_.follow(root, "broadcast");
      read_input("broadcast", root, off, bytes_of(output) + off, len, streams);
    } else {
      if (fill != nullptr) {  // read at once by the others: kept in cache
        stream_copy(fill + off, fill_from + off, len, /*stream=*/false);
      }
      members_.advance();
    }
  }
  if (is_root && fill != bytes_of(output) && input.data_ptr() != output.data_ptr()) {
    stream_copy(bytes_of(output), bytes_of(input), total, streams);
  }
  Unfinished rest{"broadcast", output, {}};
  rest.keep = staged;  // the others may still read it until the last barrier
  rest.attach = std::move(attach_);
  if (unfinished != nullptr) {
    *unfinished = std::move(rest);
  } else {
    finish(rest);
  }
  return true;
}

bool DirectCollectives::gather(const at::Tensor& output, const at::Tensor& input, int64_t root) {
  const size_t total = nbytes(input);
  const auto attach_ends = attach_ends_on_return();
  at::Tensor staged;
  const Placement input_at = place(input, staged, /*copy=*/true);
  if (!agree("gather", OpCode::kGather, total * 131 + static_cast<uint64_t>(root), input_at, {},
             everyone, nobody, total, 0)) {
    return false;
  }
  if (members_.rank() == root) {
    const bool streams = streaming(total * members_.size());
    for (int64_t m = 0; m < members_.size(); ++m) {
      char* to = bytes_of(output) + m * total;
      if (m == root) {
        stream_copy(to, bytes_of(input), total, streams);
      } else {
        read_input("gather", m, 0, to, total, streams);
      }
    }
  }
  members_.barrier("gather");
  return true;
}

bool DirectCollectives::scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) {
  const size_t total = nbytes(output);
  const bool is_root = members_.rank() == root;
  const auto attach_ends = attach_ends_on_return();
  at::Tensor staged;
  const Placement input_at = is_root ? place(input, staged, /*copy=*/true) : Placement{0, 0};
  const auto root_only = [root](int64_t m) { return m == root; };
  if (!agree("scatter", OpCode::kScatter, total * 131 + static_cast<uint64_t>(root), input_at, {},
             root_only, nobody, total * static_cast<uint64_t>(members_.size()), 0)) {
    return false;
  }
  const size_t mine = members_.rank() * total;
  if (is_root) {
    stream_copy(bytes_of(output), bytes_of(input) + mine, total, streaming(total));
  } else {
    read_input("scatter", root, mine, bytes_of(output), total, streaming(total));
  }
  members_.barrier("scatter");
  return true;
}

}  // namespace c10d_func::shm
