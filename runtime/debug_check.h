#pragma once
// C10D_FUNC_DEBUG=DETAIL: before each collective, the members of the chunk publish what they are
// about to run (op, dtypes, shapes, reduction, root, permutation, all_to_all splits) under a
// per-chunk sequence number in the world's store, and every member compares them all, whatever
// the transport. A mismatch raises on every member, listing each member's call, instead of the
// transport failing obscurely, hanging or giving a wrong result.
#include "runtime/group_spec.h"
#include "runtime/world.h"

#include <string>
#include <string_view>
#include <vector>

namespace c10d_func {

bool debug_checks_enabled();

// `fingerprint` must be equal on every member. `splits`, for all_to_all, is this member's input
// splits then its output splits (group_size each): what member i sends member j must be what j
// expects from i.
void check_members_agree(std::string_view op, const World& world, const std::string& device,
                         const std::string& tag, const Chunk& chunk, const std::string& fingerprint,
                         const std::vector<int64_t>& splits = {});

}  // namespace c10d_func
