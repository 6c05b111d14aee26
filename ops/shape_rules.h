#pragma once
// Output shapes of every collective, computed from the input shape and the group size alone,
// never from the caller's rank: the Meta kernels and the real kernels both use these, so the
// shapes FakeTensor sees are the shapes the kernels produce. SymInt-aware: a symbolic dim 0 or
// symbolic split sizes stay symbolic (divisibility and sums become guards).
#include <c10/core/SymInt.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/OptionalArrayRef.h>

#include <string_view>
#include <vector>

namespace c10d_func {

using SymShape = std::vector<c10::SymInt>;

// [d0, ...] -> [group_size * d0, ...]; a 0-d input gives [group_size]. all_gather and gather.
SymShape gathered_shape(std::string_view op, c10::SymIntArrayRef input, int64_t group_size);

// [group_size * d, ...] -> [d, ...]; dim 0 must divide. reduce_scatter and scatter.
SymShape scattered_shape(std::string_view op, c10::SymIntArrayRef input, int64_t group_size);

// dim 0 = sum(output_split_sizes), or input dim 0 when they are absent. Checks both split lists
// have group_size entries, are non-negative, and that input_split_sizes sums to input dim 0.
// Without split sizes, input dim 0 must divide by group_size (the even split).
SymShape all_to_all_shape(std::string_view op, c10::SymIntArrayRef input,
                          c10::OptionalArrayRef<c10::SymInt> output_split_sizes,
                          c10::OptionalArrayRef<c10::SymInt> input_split_sizes, int64_t group_size);

}  // namespace c10d_func
