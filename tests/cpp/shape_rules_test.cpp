// Output shapes as the Meta kernels compute them: from the input shape and group size alone.
#include "ops/shape_rules.h"
#include "tests/cpp/test_support.h"

namespace c10d_func {
namespace {

std::vector<int64_t> ints(const SymShape& shape) {
  std::vector<int64_t> out;
  for (const auto& s : shape) {
    out.push_back(s.expect_int());
  }
  return out;
}

SymShape sym(std::vector<int64_t> sizes) {
  return SymShape(sizes.begin(), sizes.end());
}

TEST(ShapeRules, GatherMultipliesDimZero) {
  EXPECT_EQ(ints(gathered_shape("all_gather_into_tensor", sym({3, 5}), 4)),
            (std::vector<int64_t>{12, 5}));
  EXPECT_EQ(ints(gathered_shape("gather", sym({0, 2}), 2)), (std::vector<int64_t>{0, 2}));
}

TEST(ShapeRules, GatherOfAScalarIsAVector) {
  EXPECT_EQ(ints(gathered_shape("all_gather_into_tensor", sym({}), 3)), (std::vector<int64_t>{3}));
}

TEST(ShapeRules, ScatterDividesDimZero) {
  EXPECT_EQ(ints(scattered_shape("reduce_scatter_tensor", sym({8, 3}), 4)),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ints(scattered_shape("scatter", sym({0}), 2)), (std::vector<int64_t>{0}));
}

TEST(ShapeRules, ScatterRejectsIndivisibleOrScalarInput) {
  EXPECT_ERROR_MENTIONS(scattered_shape("reduce_scatter_tensor", sym({6, 2}), 4),
                        "c10d_func.reduce_scatter_tensor", "dim 0 (6)",
                        "divisible by group_size (4)");
  EXPECT_ERROR_MENTIONS(scattered_shape("scatter", sym({}), 2), "at least one dimension");
}

TEST(ShapeRules, AllToAllUsesOutputSplits) {
  auto out = sym({5, 2});
  auto in_splits = sym({1, 3});
  auto out_splits = sym({2, 2});
  EXPECT_EQ(ints(all_to_all_shape("all_to_all_single", sym({4, 2}), out_splits, in_splits, 2)),
            (std::vector<int64_t>{4, 2}));
  auto uneven_out = sym({0, 7});
  EXPECT_EQ(ints(all_to_all_shape("all_to_all_single", sym({4, 2}), uneven_out, in_splits, 2)),
            (std::vector<int64_t>{7, 2}));
}

TEST(ShapeRules, AllToAllWithoutSplitsKeepsTheShape) {
  EXPECT_EQ(ints(all_to_all_shape("all_to_all_single", sym({6, 3}), c10::nullopt, c10::nullopt, 3)),
            (std::vector<int64_t>{6, 3}));
  EXPECT_ERROR_MENTIONS(
      all_to_all_shape("all_to_all_single", sym({5}), c10::nullopt, c10::nullopt, 2),
      "without input_split_sizes", "divisible by group_size (2)");
}

TEST(ShapeRules, AllToAllChecksSplitLengthsAndSums) {
  auto two = sym({2, 2});
  auto three = sym({1, 1, 2});
  auto bad_sum = sym({1, 1});
  auto negative = sym({5, -1});
  EXPECT_ERROR_MENTIONS(all_to_all_shape("all_to_all_single", sym({4}), two, three, 2),
                        "'input_split_sizes' must have group_size (2) entries, got 3");
  EXPECT_ERROR_MENTIONS(all_to_all_shape("all_to_all_single", sym({4}), three, two, 2),
                        "'output_split_sizes' must have group_size (2) entries");
  EXPECT_ERROR_MENTIONS(all_to_all_shape("all_to_all_single", sym({4}), two, bad_sum, 2),
                        "sums to 2 but input dim 0 is 4");
  EXPECT_ERROR_MENTIONS(all_to_all_shape("all_to_all_single", sym({4}), negative, two, 2),
                        "non-negative");
}

}  // namespace
}  // namespace c10d_func
