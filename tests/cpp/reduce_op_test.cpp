// reduce_op parsing and which dtypes each reduction accepts.
#include "transports/reduce_op.h"
#include "tests/cpp/test_support.h"

namespace c10d_func {
namespace {

TEST(ReduceOp, ParsesEveryNameInAnyCase) {
  EXPECT_EQ(parse_reduce_op("all_reduce", "sum"), ReduceOp::kSum);
  EXPECT_EQ(parse_reduce_op("all_reduce", "AVG"), ReduceOp::kAvg);
  EXPECT_EQ(parse_reduce_op("all_reduce", "product"), ReduceOp::kProduct);
  EXPECT_EQ(parse_reduce_op("all_reduce", "min"), ReduceOp::kMin);
  EXPECT_EQ(parse_reduce_op("all_reduce", "max"), ReduceOp::kMax);
  EXPECT_EQ(parse_reduce_op("all_reduce", "band"), ReduceOp::kBand);
  EXPECT_EQ(parse_reduce_op("all_reduce", "bor"), ReduceOp::kBor);
  EXPECT_EQ(parse_reduce_op("all_reduce", "Bxor"), ReduceOp::kBxor);
  for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin,
                  ReduceOp::kMax, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    EXPECT_EQ(parse_reduce_op("x", reduce_op_name(op)), op);
  }
}

TEST(ReduceOp, RejectsUnknownNames) {
  EXPECT_ERROR_MENTIONS(parse_reduce_op("reduce", "mean"), "c10d_func.reduce", "'reduce_op'",
                        "got 'mean'");
}

TEST(ReduceOp, BitwiseNeedsIntegersOrBool) {
  check_reduce_dtype("all_reduce", ReduceOp::kBxor, c10::kInt);
  check_reduce_dtype("all_reduce", ReduceOp::kBand, c10::kBool);
  EXPECT_ERROR_MENTIONS(check_reduce_dtype("all_reduce", ReduceOp::kBor, c10::kFloat),
                        "bitwise reduce_op 'bor'", "Float");
}

TEST(ReduceOp, ComplexTakesSumAndAvgOnly) {
  check_reduce_dtype("all_reduce", ReduceOp::kSum, c10::kComplexFloat);
  check_reduce_dtype("all_reduce", ReduceOp::kAvg, c10::kComplexDouble);
  EXPECT_ERROR_MENTIONS(check_reduce_dtype("all_reduce", ReduceOp::kMax, c10::kComplexFloat),
                        "'max' is not defined", "sum and avg only");
  EXPECT_ERROR_MENTIONS(check_reduce_dtype("all_reduce", ReduceOp::kProduct, c10::kComplexFloat),
                        "'product'");
}

TEST(ReduceOp, AvgIsNotDefinedForBool) {
  check_reduce_dtype("all_reduce", ReduceOp::kSum, c10::kBool);
  EXPECT_ERROR_MENTIONS(check_reduce_dtype("all_reduce", ReduceOp::kAvg, c10::kBool),
                        "'avg' is not defined for dtype bool");
}

TEST(ReduceOp, Fp8CanBeMovedButNotReduced) {
  EXPECT_ERROR_MENTIONS(
      check_reduce_dtype("reduce_scatter_tensor", ReduceOp::kSum, c10::kFloat8_e4m3fn),
      "c10d_func.reduce_scatter_tensor", "can be moved");
}

TEST(ReduceOp, FloatsAndIntsTakeEveryArithmeticReduction) {
  for (auto dtype : {c10::kFloat, c10::kDouble, c10::kHalf, c10::kBFloat16, c10::kInt, c10::kLong,
                     c10::kShort, c10::kChar, c10::kByte}) {
    for (auto op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
      check_reduce_dtype("all_reduce", op, dtype);
    }
  }
}

}  // namespace
}  // namespace c10d_func
