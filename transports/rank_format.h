#pragma once
// How every message of the library writes a list of ranks: "[0, 1, 3]". Torch-free, shared by
// the transports and the group rules.
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace c10d_func {

std::string format_ranks(c10::ArrayRef<int64_t> ranks);

}  // namespace c10d_func
