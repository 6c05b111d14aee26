// Validation and chunking of (tag, ranks, group_size); see group_spec.h.
#include "runtime/group_spec.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

namespace c10d_func {

std::string Chunk::describe() const {
  return format_ranks(members);
}

GroupSpec GroupSpec::parse(std::string_view op, std::string_view tag, c10::ArrayRef<int64_t> ranks,
                           int64_t group_size) {
  TORCH_CHECK(!ranks.empty(), "c10d_func.", op, ": argument 'ranks' must not be empty");
  TORCH_CHECK(group_size > 0, "c10d_func.", op, ": argument 'group_size' must be positive, got ",
              group_size);
  TORCH_CHECK(static_cast<int64_t>(ranks.size()) % group_size == 0, "c10d_func.", op,
              ": argument 'group_size' (", group_size, ") must divide len(ranks) (", ranks.size(),
              "); ranks=", format_ranks(ranks));
  std::unordered_set<int64_t> seen;
  for (int64_t rank : ranks) {
    TORCH_CHECK(rank >= 0, "c10d_func.", op, ": argument 'ranks' holds a negative rank ", rank,
                "; ranks=", format_ranks(ranks));
    TORCH_CHECK(seen.insert(rank).second, "c10d_func.", op, ": argument 'ranks' holds rank ", rank,
                " more than once; ranks=", format_ranks(ranks));
  }
  return GroupSpec{std::string(tag), ranks.vec(), group_size};
}

void GroupSpec::check_world(std::string_view op, int64_t world_size) const {
  for (int64_t rank : ranks) {
    TORCH_CHECK(rank < world_size, "c10d_func.", op, ": argument 'ranks' holds rank ", rank,
                ", out of range for a world of size ", world_size, "; ", describe());
  }
}

Chunk GroupSpec::chunk_of(std::string_view op, int64_t global_rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  TORCH_CHECK(it != ranks.end(), "c10d_func.", op, ": the calling rank ", global_rank,
              " is not in argument 'ranks'; ", describe());
  const int64_t position = it - ranks.begin();
  const int64_t first = position / group_size * group_size;
  Chunk chunk;
  chunk.members.assign(ranks.begin() + first, ranks.begin() + first + group_size);
  chunk.index = position - first;
  return chunk;
}

std::string GroupSpec::describe() const {
  std::ostringstream out;
  out << "tag='" << tag << "', ranks=" << format_ranks(ranks) << ", group_size=" << group_size;
  return out.str();
}

void check_group_index(std::string_view op, std::string_view arg, int64_t value,
                       int64_t group_size) {
  TORCH_CHECK(value >= 0 && value < group_size, "c10d_func.", op, ": argument '", arg,
              "' is an index inside the group and must be in [0, ", group_size, "), got ", value);
}

std::vector<int64_t> check_permutation(std::string_view op, c10::ArrayRef<int64_t> src_dst,
                                       int64_t group_size) {
  TORCH_CHECK(static_cast<int64_t>(src_dst.size()) == group_size, "c10d_func.", op,
              ": argument 'src_dst' must have group_size (", group_size, ") entries, got ",
              src_dst.size());
  std::vector<int64_t> inverse(group_size, -1);
  for (int64_t i = 0; i < group_size; ++i) {
    const int64_t dst = src_dst[i];
    TORCH_CHECK(dst >= 0 && dst < group_size, "c10d_func.", op, ": argument 'src_dst' entry ", i,
                " is ", dst, ", out of range [0, ", group_size, ")");
    TORCH_CHECK(inverse[dst] == -1, "c10d_func.", op,
                ": argument 'src_dst' is not a permutation: ", "members ", inverse[dst], " and ", i,
                " both send to ", dst, "; src_dst=", format_ranks(src_dst));
    inverse[dst] = i;
  }
  return inverse;
}

}  // namespace c10d_func
