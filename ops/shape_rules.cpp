// Shape rules; see shape_rules.h.
#include "ops/shape_rules.h"

#include <c10/util/Exception.h>

namespace c10d_func {
namespace {

// Evaluates a symbolic condition, installing a guard when it is symbolic.
bool holds(const c10::SymBool& condition) {
  return condition.guard_bool(__FILE__, __LINE__);
}

c10::SymInt sum_of(c10::ArrayRef<c10::SymInt> values) {
  c10::SymInt total = 0;
  for (const auto& value : values) {
    total = total + value;
  }
  return total;
}

void check_split_sizes(std::string_view op, std::string_view arg, c10::ArrayRef<c10::SymInt> splits,
                       int64_t group_size) {
  TORCH_CHECK(static_cast<int64_t>(splits.size()) == group_size, "c10d_func.", op, ": argument '",
              arg, "' must have group_size (", group_size, ") entries, got ", splits.size());
  for (const auto& split : splits) {
    TORCH_CHECK(holds(split.sym_ge(0)), "c10d_func.", op, ": argument '", arg,
                "' must be non-negative, got ", split);
  }
}

}  // namespace

SymShape gathered_shape(std::string_view op, c10::SymIntArrayRef input, int64_t group_size) {
  TORCH_CHECK(group_size > 0, "c10d_func.", op, ": group_size must be positive");
  if (input.empty()) {
    return {c10::SymInt(group_size)};
  }
  SymShape shape(input.begin(), input.end());
  shape[0] = shape[0] * group_size;
  return shape;
}

SymShape scattered_shape(std::string_view op, c10::SymIntArrayRef input, int64_t group_size) {
  TORCH_CHECK(group_size > 0, "c10d_func.", op, ": group_size must be positive");
  TORCH_CHECK(!input.empty(), "c10d_func.", op,
              ": the input must have at least one dimension to split ", "among group_size (",
              group_size, ") members");
  TORCH_CHECK(holds((input[0] % group_size).sym_eq(0)), "c10d_func.", op, ": input dim 0 (",
              input[0], ") must be divisible by group_size (", group_size, ")");
  SymShape shape(input.begin(), input.end());
  shape[0] = shape[0] / group_size;
  return shape;
}

SymShape all_to_all_shape(std::string_view op, c10::SymIntArrayRef input,
                          c10::OptionalArrayRef<c10::SymInt> output_split_sizes,
                          c10::OptionalArrayRef<c10::SymInt> input_split_sizes,
                          int64_t group_size) {
  TORCH_CHECK(!input.empty(), "c10d_func.", op, ": the input must have at least one dimension");
  SymShape shape(input.begin(), input.end());
  if (input_split_sizes.has_value()) {
    check_split_sizes(op, "input_split_sizes", *input_split_sizes, group_size);
    const auto total = sum_of(*input_split_sizes);
    TORCH_CHECK(holds(total.sym_eq(input[0])), "c10d_func.", op,
                ": argument 'input_split_sizes' sums to ", total, " but input dim 0 is ", input[0]);
  } else {
    TORCH_CHECK(holds((input[0] % group_size).sym_eq(0)), "c10d_func.", op,
                ": without input_split_sizes, input dim 0 (", input[0],
                ") must be divisible by group_size (", group_size, ")");
  }
  if (output_split_sizes.has_value()) {
    check_split_sizes(op, "output_split_sizes", *output_split_sizes, group_size);
    shape[0] = sum_of(*output_split_sizes);
  }
  return shape;
}

}  // namespace c10d_func
