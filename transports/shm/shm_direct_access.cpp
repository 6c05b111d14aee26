// How the direct path's members reach each other's tensors (see shm_direct.h): where each
// publishes its input and output (in the pool, attached, or staged as a copy), checking the
// places its peers published, and reading or writing a peer's piece.
#include "transports/shm/shm_direct.h"

#include <ATen/ATen.h>

#include "transports/shm/cross_memory.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/stream_copy.h"

#include <cerrno>
#include <cstring>

namespace c10d_func::shm {
namespace {

// A private tensor at least this large is attached rather than copied into the pool. Measured on
// a 2-core VM, in-place dist.all_reduce through the backend: attached 5.0-5.4 ms at 32 MiB and
// 8.8-9.2 ms at 64 MiB against 9.5-10.1 and 16.7-17.2 ms copied; at 2 MiB, 0.7 ms against 0.2
// (process_vm_readv pins pages per call: it pays off once the copy it saves is large).
constexpr size_t kAttachFromBytes = size_t{16} << 20;

}  // namespace

DirectCollectives::Placement DirectCollectives::place(const at::Tensor& tensor, at::Tensor& staged,
                                                      bool copy) {
  const size_t bytes = nbytes(tensor);
  if (bytes == 0) {
    return {0, 0};
  }
  if (auto offset = pool_->offset_in_segment(tensor)) {
    return {static_cast<int64_t>(*offset), 0};
  }
  if (cross_memory_ && bytes >= kAttachFromBytes) {
    if (!attach_) {  // the peers may attach from before they learn the address to the end
      std::vector<pid_t> peers;
      for (int64_t m = 0; m < members_.size(); ++m) {
        if (m != members_.rank()) {
          peers.push_back(members_.pid_of(m));
        }
      }
      attach_ = std::make_shared<AttachPermission>(peers);
    }
    return {kAttached, reinterpret_cast<uint64_t>(tensor.data_ptr())};
  }
  auto block = pool_->allocate({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte),
                               /*user_owned=*/false);
  if (!block) {
    return {kUnplaced, 0};
  }
  if (copy) {
    stream_copy(block->data_ptr(), tensor.data_ptr(), bytes, streaming(bytes));
  }
  staged = *block;
  return {static_cast<int64_t>(*pool_->offset_in_segment(staged)), 0};
}

DirectCollectives::Placement DirectCollectives::place_for_peers(const at::Tensor& input,
                                                                at::Tensor& staged,
                                                                size_t own_begin, size_t own_end) {
  const Placement placed = place(input, staged, /*copy=*/false);
  if (staged.defined()) {
    const size_t total = nbytes(input);
    stream_copy_outside(staged.data_ptr(), input.data_ptr(), total, own_begin, own_end,
                        streaming(total));
  }
  return placed;
}

void DirectCollectives::check_placed(const char* op, int64_t m, int64_t exposed, uint64_t bytes,
                                     const char* what) {
  const std::string wrong =
      check_placement(exposed, bytes, cross_memory_, regions_begin_, segment_end_);
  if (!wrong.empty()) {
    members_.fail(op, members_.name_of(m) + " published a bad place for its " + what + ": " +
                          wrong + " (a corrupted or version-skewed peer)");
  }
}

void DirectCollectives::read_input(const char* op, int64_t m, size_t offset, void* to, size_t bytes,
                                   bool streams) {
  const Placement& peer = inputs_[m];
  if (peer.offset == kAttached) {
    if (!read_from(members_.pid_of(m), to, peer.address + offset, bytes)) {
      members_.fail(
          op, "cross-memory read from " + members_.name_of(m) + " failed: " + std::strerror(errno));
    }
    return;
  }
  stream_copy(to, pool_->base() + peer.offset + offset, bytes, streams);
}

const char* DirectCollectives::input_piece(const char* op, int64_t m, size_t offset, size_t bytes,
                                           char* scratch) {
  if (inputs_[m].offset == kAttached) {
    read_input(op, m, offset, scratch, bytes, false);
    return scratch;
  }
  return pool_->base() + inputs_[m].offset + offset;
}

void DirectCollectives::write_output(const char* op, int64_t m, size_t offset, const void* from,
                                     size_t bytes, bool streams) {
  const Placement& peer = outputs_[m];
  if (peer.offset == kAttached) {
    if (!write_to(members_.pid_of(m), peer.address + offset, from, bytes)) {
      members_.fail(
          op, "cross-memory write to " + members_.name_of(m) + " failed: " + std::strerror(errno));
    }
    return;
  }
  stream_copy(pool_->base() + peer.offset + offset, from, bytes, streams);
}

}  // namespace c10d_func::shm
