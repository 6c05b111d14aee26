#pragma once
// C10D_FUNC_DEBUG=DETAIL: before each collective, the members of the chunk publish what they are
// about to run (op, dtypes, shapes) under a per-chunk sequence number in the world's store, and
// every member compares them all. A mismatch raises on every member, listing each member's call,
// instead of the transport failing obscurely or hanging.
#include "ops/group_spec.h"
#include "ops/world.h"

#include <string>
#include <string_view>

namespace c10d_func {

bool debug_checks_enabled();

void check_members_agree(std::string_view op, const World& world, const std::string& device,
                         const std::string& tag, const Chunk& chunk,
                         const std::string& fingerprint);

}  // namespace c10d_func
