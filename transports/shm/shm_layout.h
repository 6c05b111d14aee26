#pragma once
// What every file of the shm transport shares: the segment's layout (a header, one MemberControl
// per member, the all_to_all directory, two sets of member slots and a result slot, then one
// symmetric-memory region per member), its constants, and the codes of the collectives members
// compare at their first barrier.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "transports/shm/shm_segment.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace c10d_func::shm {

constexpr uint64_t kMagic = 0x6331306466756e63ULL;  // "c10dfunc"
constexpr size_t kAlign = 64;
constexpr size_t kDefaultChunkBytes = size_t{4} << 20;
constexpr size_t kInlineBytes = size_t{256} << 10;
// Chunks up to this size are reduced whole by every member: one barrier instead of two.
constexpr size_t kWholeReduceBytes = size_t{64} << 10;
constexpr int kSpins = 256;
constexpr int kYields = 256;
constexpr auto kSleepSlice = std::chrono::microseconds(10000);

inline size_t round_up(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline size_t chunk_bytes_from_env() {
  const char* value = std::getenv("C10D_FUNC_SHM_CHUNK_BYTES");
  if (value == nullptr || *value == '\0') {
    return kDefaultChunkBytes;
  }
  const long long parsed = std::atoll(value);
  TORCH_CHECK(parsed >= 4096, "c10d_func: C10D_FUNC_SHM_CHUNK_BYTES must be at least 4096, got ",
              value);
  return round_up(static_cast<size_t>(parsed), kAlign);
}

struct Header {
  uint64_t magic;
  uint64_t members;
  uint64_t chunk_bytes;
  uint64_t region_bytes;  // each member's symmetric-memory region (rank 0's pool bound)
  uint64_t nonce;         // random, also in the store: a segment of another job is refused
};

inline size_t controls_offset() {
  return round_up(sizeof(Header), kAlign);
}

// all_to_all's directory: for each (member, peer) what the member sends the peer (byte offset in
// its input, length) and the length it expects from the peer; every member checks every pair.
constexpr size_t kDirectoryFields = 3;
inline size_t directory_offset(size_t members) {
  return round_up(controls_offset() + members * sizeof(MemberControl), kAlign);
}

inline size_t data_offset(size_t members) {
  return round_up(
      directory_offset(members) + members * members * kDirectoryFields * sizeof(int64_t), kAlign);
}

inline size_t regions_offset(size_t members, size_t chunk) {
  return round_up(data_offset(members) + 2 * (members + 1) * chunk, 4096);
}

// Sparse: the regions' pages exist only once a pool reserves them.
inline size_t segment_bytes(size_t members, size_t chunk, size_t region) {
  return regions_offset(members, chunk) + members * region;
}

enum class OpCode : uint64_t {
  kAllReduce = 1,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kGather,
  kScatter,
};

inline const char* op_name(uint64_t code) {
  switch (static_cast<OpCode>(code)) {
    case OpCode::kAllReduce:
      return "all_reduce/reduce";
    case OpCode::kAllGather:
      return "all_gather";
    case OpCode::kReduceScatter:
      return "reduce_scatter";
    case OpCode::kAllToAll:
      return "all_to_all/permute";
    case OpCode::kBroadcast:
      return "broadcast";
    case OpCode::kGather:
      return "gather";
    case OpCode::kScatter:
      return "scatter";
  }
  return "an unknown collective";
}

// What members must agree on: the op in the low byte, then a mix of dtype, size and root.
inline uint64_t fingerprint(OpCode op, uint64_t detail) {
  return static_cast<uint64_t>(op) | ((detail * 0x9e3779b97f4a7c15ULL) << 8);
}

inline size_t nbytes(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

inline char* bytes_of(const at::Tensor& tensor) {
  return static_cast<char*>(tensor.data_ptr());
}

}  // namespace c10d_func::shm
