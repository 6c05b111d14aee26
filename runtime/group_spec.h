#pragma once
// GroupSpec owns the plain-data group that every collective names: (tag, ranks, group_size).
// It validates the structure once (shared by every kernel, Meta included), cuts `ranks` into
// consecutive chunks of `group_size`, and finds the caller's chunk. Only c10 is needed, so the
// rules are unit-tested without a world or any process.
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include "transports/rank_format.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace c10d_func {

// The caller's chunk: the members' global ranks in group order and the caller's index among them.
struct Chunk {
  std::vector<int64_t> members;
  int64_t index = -1;

  int64_t size() const { return static_cast<int64_t>(members.size()); }
  std::string describe() const;  // "[2, 3]"
};

struct GroupSpec {
  std::string tag;
  std::vector<int64_t> ranks;
  int64_t group_size = 0;

  // Checks what needs no world: group_size > 0 and dividing len(ranks), ranks >= 0, no duplicates.
  static GroupSpec parse(std::string_view op, std::string_view tag, c10::ArrayRef<int64_t> ranks,
                         int64_t group_size);

  int64_t num_chunks() const { return static_cast<int64_t>(ranks.size()) / group_size; }

  // Every rank must exist in a world of `world_size`.
  void check_world(std::string_view op, int64_t world_size) const;

  // The chunk that holds `global_rank`; raises if the caller is not in `ranks`.
  Chunk chunk_of(std::string_view op, int64_t global_rank) const;

  // "tag='x', ranks=[0, 1, 2, 3], group_size=2": how errors and introspection name a group.
  std::string describe() const;
};

// An index inside the group (src, dst): 0 <= value < group_size.
void check_group_index(std::string_view op, std::string_view arg, int64_t value,
                       int64_t group_size);

// `src_dst` must be a permutation of 0 .. group_size-1; returns its inverse (who sends to me).
std::vector<int64_t> check_permutation(std::string_view op, c10::ArrayRef<int64_t> src_dst,
                                       int64_t group_size);

}  // namespace c10d_func
