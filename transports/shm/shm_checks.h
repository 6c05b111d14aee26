#pragma once
// The checks of what the shm transport reads from its peers' part of the segment (and from the
// store) before any of it is used as a size, an offset or a count: a buggy, version-skewed or
// dying peer, or a process of the same user that wrote into the segment, makes the collective
// fail on every member with a message, never an access out of bounds. Pure functions of the
// values read, so that every one can be checked (and fuzzed) without a segment. Each returns
// what is wrong, or an empty string.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace c10d_func::shm {

// The most members, the largest chunk and the largest region a segment may claim: bounds that
// keep every layout computation far from overflow (a real segment is far below them).
constexpr uint64_t kMaxMembers = 4096;
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxRegionBytes = uint64_t{1} << 40;

// The header rank 0 wrote, read by a member that expects `members` and the job's `nonce` (from
// the store) and mapped `mapped_bytes` (the object's size).
struct SegmentHeaderValues {
  uint64_t magic = 0;
  uint64_t members = 0;
  uint64_t chunk_bytes = 0;
  uint64_t region_bytes = 0;
  uint64_t nonce = 0;
};
std::string check_segment_header(const SegmentHeaderValues& header, uint64_t members,
                                 uint64_t nonce, uint64_t mapped_bytes);

// The store's record of a segment: "<name> <nonce hex>". `error` says what is wrong.
struct SegmentRecord {
  std::string name;
  uint64_t nonce = 0;
  std::string error;
};
std::string segment_record(const std::string& name, uint64_t nonce);
SegmentRecord parse_segment_record(std::string_view record);

// Where a peer says a tensor of `bytes` lies: an offset into the segment that must keep the
// whole tensor inside [regions_begin, segment_end) (the members' symmetric memory: never the
// header, the control blocks or the slots), or kAttached, valid only where the members agreed on
// cross-memory attach.
std::string check_placement(int64_t exposed, uint64_t bytes, bool cross_memory,
                            uint64_t regions_begin, uint64_t segment_end);

// A byte count a peer published (an all_to_all split, a number of rounds): within [0, most].
std::string check_count(int64_t value, uint64_t most);

// The longest all_to_all split a member may publish (256 TiB): far above any real one, and low
// enough that a member's sum of them cannot overflow.
constexpr uint64_t kMaxSplitBytes = uint64_t{1} << 48;

// An all_to_all's split sizes as its `members` published them (each already bounded with
// check_count): `sends(from, to)`, the bytes `from` sends `to`, and `expects(to, from)`, the bytes
// `to` expects from `from`. The first pair that differs, worded with `name_of(member)`.
template <typename Sends, typename Expects, typename Name>
std::string unpaired_splits(int64_t members, const Sends& sends, const Expects& expects,
                            const Name& name_of) {
  for (int64_t from = 0; from < members; ++from) {
    for (int64_t to = 0; to < members; ++to) {
      if (sends(from, to) != expects(to, from)) {
        return "split sizes disagree: " + name_of(from) + " sends " +
               std::to_string(sends(from, to)) + " bytes to " + name_of(to) + ", which expects " +
               std::to_string(expects(to, from)) +
               " (output_split_sizes on one member must match input_split_sizes on the others)";
      }
    }
  }
  return {};
}

// A peer's failure text: at most `capacity` bytes, read up to its first NUL.
std::string bounded_text(const char* text, size_t capacity);

// Test-only fault injection (tests/python/test_shm.py, through
// c10d_func._C.set_shm_fault_for_test): the member that writes a bad value where its peers read it
// ("header": rank 0, which writes the header; the others: rank 1). One relaxed load per use:
// nothing on the collectives' path. "rewrite": rank 1 overwrites values after every member has
// checked them (the header's sizes, its placements, its all_to_all directory entries), which
// nobody may read again; every member passes one more barrier first, so the others have
// checked when it writes.
// "many_rounds": rank 1 publishes the most rounds a peer is believed (every member then steps
// until the timeout).
enum class ShmFault : int {
  kNone,
  kHeader,
  kPlacement,
  kSplit,
  kRounds,
  kPid,
  kRewrite,
  kManyRounds
};
// "", "header", "placement", "split", "rounds", "pid", "rewrite" or "many_rounds"; throws
// std::invalid_argument otherwise.
void set_fault_for_test(std::string_view kind);
extern std::atomic<int> fault_for_test;
// Whether `fault` is injected (every member takes the steps it needs, such as a barrier).
inline bool injects_for_test(ShmFault fault) {
  return fault_for_test.load(std::memory_order_relaxed) == static_cast<int>(fault);
}
// Whether member `rank` is the one that writes the bad value of `fault`.
inline bool corrupts_for_test(ShmFault fault, int64_t rank) {
  return injects_for_test(fault) && rank == (fault == ShmFault::kHeader ? 0 : 1);
}

}  // namespace c10d_func::shm
