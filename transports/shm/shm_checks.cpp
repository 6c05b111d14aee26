// See shm_checks.h.
#include "transports/shm/shm_checks.h"

#include "transports/shm/shm_layout.h"

#include <cstring>
#include <stdexcept>
#include <utility>

namespace c10d_func::shm {

std::string check_segment_header(const SegmentHeaderValues& header, uint64_t members,
                                 uint64_t nonce, uint64_t mapped_bytes) {
  if (mapped_bytes < sizeof(Header)) {
    return "it holds " + std::to_string(mapped_bytes) + " bytes, less than a header";
  }
  if (header.magic != kMagic) {
    return "it is not a c10d_func segment (another program's, or another version's)";
  }
  if (header.nonce != nonce) {
    return "it belongs to another group or job (its nonce is not the one in the store)";
  }
  if (header.members != members || members == 0 || members > kMaxMembers) {
    return "it is made for " + std::to_string(header.members) + " members, not " +
           std::to_string(members);
  }
  if (header.chunk_bytes < 4096 || header.chunk_bytes > kMaxChunkBytes ||
      header.chunk_bytes % kAlign != 0) {
    return "its chunk of " + std::to_string(header.chunk_bytes) + " bytes is out of bounds";
  }
  if (header.chunk_bytes < members * kAlign) {
    // A member's slot holds a piece for every member (all_to_all through the slots), each at
    // least kAlign bytes: a smaller chunk would spill into the next member's slot.
    return "its chunk of " + std::to_string(header.chunk_bytes) + " bytes is too small for " +
           std::to_string(members) + " members (at least " + std::to_string(kAlign) +
           " bytes each: raise C10D_FUNC_SHM_CHUNK_BYTES)";
  }
  if (header.region_bytes > kMaxRegionBytes || header.region_bytes % 4096 != 0) {
    return "its region of " + std::to_string(header.region_bytes) + " bytes is out of bounds";
  }
  // Within the bounds above, none of these sums can overflow.
  const uint64_t needed = segment_bytes(members, header.chunk_bytes, header.region_bytes);
  if (mapped_bytes < needed) {
    return "it holds " + std::to_string(mapped_bytes) + " bytes, less than the " +
           std::to_string(needed) + " its header describes";
  }
  return {};
}

std::string segment_record(const std::string& name, uint64_t nonce) {
  static const char* const digits = "0123456789abcdef";
  std::string record = name + " ";
  for (int shift = 60; shift >= 0; shift -= 4) {
    record += digits[(nonce >> shift) & 0xf];
  }
  return record;
}

SegmentRecord parse_segment_record(std::string_view record) {
  SegmentRecord parsed;
  const size_t space = record.find(' ');
  if (space == std::string_view::npos || record.size() - space - 1 != 16) {
    parsed.error = "not '<name> <16 hex digits>'";
    return parsed;
  }
  const std::string_view name = record.substr(0, space);
  // A POSIX shared-memory name: one leading '/', then a plain file name.
  if (name.size() < 2 || name.size() > 200 || name[0] != '/') {
    parsed.error = "a segment name that is not '/<file name>'";
    return parsed;
  }
  for (const char c : name.substr(1)) {
    const bool plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == '-' || c == '.';
    if (!plain) {
      parsed.error = "a segment name with a character other than letters, digits, '_-.'";
      return parsed;
    }
  }
  uint64_t nonce = 0;
  for (const char c : record.substr(space + 1)) {
    int digit = -1;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    }
    if (digit < 0) {
      parsed.error = "a nonce that is not lower-case hex";
      return parsed;
    }
    nonce = nonce << 4 | static_cast<uint64_t>(digit);
  }
  parsed.name = std::string(name);
  parsed.nonce = nonce;
  return parsed;
}

std::string check_placement(int64_t exposed, uint64_t bytes, bool cross_memory,
                            uint64_t regions_begin, uint64_t segment_end) {
  if (exposed == kAttached) {
    return cross_memory ? std::string()
                        : "it says its tensor is reached by cross-memory attach, which the "
                          "members did not agree on";
  }
  if (exposed < 0) {
    return "its tensor's place " + std::to_string(exposed) + " is neither an offset nor attached";
  }
  const auto offset = static_cast<uint64_t>(exposed);
  if (offset < regions_begin || offset > segment_end || bytes > segment_end - offset) {
    return "its tensor of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
           " would lie outside the members' memory [" + std::to_string(regions_begin) + ", " +
           std::to_string(segment_end) + ")";
  }
  return {};
}

std::string check_count(int64_t value, uint64_t most) {
  if (value < 0 || static_cast<uint64_t>(value) > most) {
    return std::to_string(value) + " is outside [0, " + std::to_string(most) + "]";
  }
  return {};
}

std::atomic<int> fault_for_test{static_cast<int>(ShmFault::kNone)};

void set_fault_for_test(std::string_view kind) {
  static constexpr std::pair<std::string_view, ShmFault> kKinds[] = {
      {"", ShmFault::kNone},
      {"header", ShmFault::kHeader},
      {"placement", ShmFault::kPlacement},
      {"split", ShmFault::kSplit},
      {"rounds", ShmFault::kRounds},
      {"pid", ShmFault::kPid},
      {"rewrite", ShmFault::kRewrite},
      {"many_rounds", ShmFault::kManyRounds}};
  for (const auto& [name, fault] : kKinds) {
    if (name == kind) {
      fault_for_test.store(static_cast<int>(fault), std::memory_order_relaxed);
      return;
    }
  }
  throw std::invalid_argument("c10d_func: unknown shm fault '" + std::string(kind) + "'");
}

std::string bounded_text(const char* text, size_t capacity) {
  const void* end = std::memchr(text, '\0', capacity);
  const size_t length =
      end == nullptr ? capacity : static_cast<size_t>(static_cast<const char*>(end) - text);
  return std::string(text, length);
}

}  // namespace c10d_func::shm
