// Chunking and validation of (tag, ranks, group_size) without any process or world.
#include "runtime/group_spec.h"
#include "tests/cpp/test_support.h"

namespace c10d_func {
namespace {

TEST(GroupSpec, CutsRanksIntoConsecutiveChunks) {
  auto spec = GroupSpec::parse("all_reduce", "tp", {0, 1, 2, 3}, 2);
  EXPECT_EQ(spec.num_chunks(), 2);
  auto chunk = spec.chunk_of("all_reduce", 3);
  EXPECT_EQ(chunk.members, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(chunk.index, 1);
  EXPECT_EQ(spec.chunk_of("all_reduce", 0).members, (std::vector<int64_t>{0, 1}));
}

TEST(GroupSpec, KeepsTheOrderOfRanksInsideAChunk) {
  auto spec = GroupSpec::parse("all_reduce", "", {3, 1, 2, 0}, 4);
  auto chunk = spec.chunk_of("all_reduce", 2);
  EXPECT_EQ(chunk.members, (std::vector<int64_t>{3, 1, 2, 0}));
  EXPECT_EQ(chunk.index, 2);
}

TEST(GroupSpec, WholeListIsOneChunkWhenGroupSizeIsItsLength) {
  auto spec = GroupSpec::parse("broadcast", "", {0, 1, 2}, 3);
  EXPECT_EQ(spec.num_chunks(), 1);
  EXPECT_EQ(spec.chunk_of("broadcast", 1).index, 1);
}

TEST(GroupSpec, RejectsGroupSizeThatDoesNotDivide) {
  EXPECT_ERROR_MENTIONS(GroupSpec::parse("all_reduce", "", {0, 1, 2}, 2), "c10d_func.all_reduce",
                        "group_size", "must divide len(ranks)");
}

TEST(GroupSpec, RejectsNonPositiveGroupSize) {
  EXPECT_ERROR_MENTIONS(GroupSpec::parse("gather", "", {0, 1}, 0), "c10d_func.gather",
                        "'group_size' must be positive");
}

TEST(GroupSpec, RejectsDuplicateAndNegativeRanks) {
  EXPECT_ERROR_MENTIONS(GroupSpec::parse("all_reduce", "", {0, 1, 1, 2}, 2), "'ranks'",
                        "rank 1 more than once");
  EXPECT_ERROR_MENTIONS(GroupSpec::parse("all_reduce", "", {0, -1}, 2), "negative rank -1");
  EXPECT_ERROR_MENTIONS(GroupSpec::parse("all_reduce", "", {}, 1), "'ranks' must not be empty");
}

TEST(GroupSpec, RejectsCallerOutsideRanks) {
  auto spec = GroupSpec::parse("scatter", "", {0, 1}, 2);
  EXPECT_ERROR_MENTIONS(spec.chunk_of("scatter", 3), "c10d_func.scatter", "calling rank 3",
                        "not in argument 'ranks'");
}

TEST(GroupSpec, RejectsRanksOutsideTheWorld) {
  auto spec = GroupSpec::parse("all_reduce", "", {0, 5}, 2);
  EXPECT_ERROR_MENTIONS(spec.check_world("all_reduce", 4), "rank 5", "world of size 4");
  spec.check_world("all_reduce", 6);
}

TEST(GroupSpec, DescribesItselfForErrors) {
  auto spec = GroupSpec::parse("all_reduce", "dp", {0, 1}, 2);
  EXPECT_EQ(spec.describe(), "tag='dp', ranks=[0, 1], group_size=2");
}

TEST(GroupIndex, ChecksRange) {
  check_group_index("broadcast", "src", 1, 2);
  EXPECT_ERROR_MENTIONS(check_group_index("broadcast", "src", 2, 2), "c10d_func.broadcast", "'src'",
                        "[0, 2)", "got 2");
  EXPECT_ERROR_MENTIONS(check_group_index("reduce", "dst", -1, 2), "'dst'");
}

TEST(Permutation, InvertsAValidPermutation) {
  EXPECT_EQ(check_permutation("permute", {1, 2, 0}, 3), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(check_permutation("permute", {0}, 1), (std::vector<int64_t>{0}));
}

TEST(Permutation, RejectsNonPermutations) {
  EXPECT_ERROR_MENTIONS(check_permutation("permute", {1, 1}, 2), "not a permutation");
  EXPECT_ERROR_MENTIONS(check_permutation("permute", {0, 2}, 2), "out of range");
  EXPECT_ERROR_MENTIONS(check_permutation("permute", {0}, 2), "group_size (2) entries");
}

}  // namespace
}  // namespace c10d_func
