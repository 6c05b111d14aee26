// NCCL's names of c10d_func's wire dtypes and reductions (nccl_types.h), against the table NCCL
// documents, and a split's color. Built where nccl.h is (CUDA builds), run without a GPU.
#include "transports/nccl/nccl_types.h"

#include <gtest/gtest.h>

#include "transports/wire_plan.h"

namespace c10d_func::nccl {
namespace {

TEST(NcclTypes, EveryWireDtypeHasTheNcclTypeOfItsWidthAndKind) {
  EXPECT_EQ(nccl_dtype(c10::kFloat), ncclFloat32);
  EXPECT_EQ(nccl_dtype(c10::kDouble), ncclFloat64);
  EXPECT_EQ(nccl_dtype(c10::kHalf), ncclFloat16);
  EXPECT_EQ(nccl_dtype(c10::kBFloat16), ncclBfloat16);
  EXPECT_EQ(nccl_dtype(c10::kChar), ncclInt8);
  EXPECT_EQ(nccl_dtype(c10::kByte), ncclUint8);
  EXPECT_EQ(nccl_dtype(c10::kInt), ncclInt32);
  EXPECT_EQ(nccl_dtype(c10::kLong), ncclInt64);
}

TEST(NcclTypes, EveryDtypeTheLibraryReducesReachesNcclAsOneItKnows) {
  // Whatever the caller's dtype, staging leaves a wire dtype NCCL has (bool, int16, the wide
  // unsigned types and complex are converted or viewed first).
  for (const auto dtype : {c10::kBool, c10::kByte, c10::kChar, c10::kShort, c10::kInt, c10::kLong,
                           c10::kUInt16, c10::kUInt32, c10::kUInt64, c10::kHalf, c10::kBFloat16,
                           c10::kFloat, c10::kDouble, c10::kComplexFloat, c10::kComplexDouble}) {
    const WirePlan plan = plan_wire(dtype, ReduceOp::kSum, /*transport_averages_floats=*/true);
    EXPECT_NO_THROW(nccl_dtype(plan.wire_dtype)) << c10::toString(dtype);
  }
}

TEST(NcclTypes, ReductionsMapToNcclsOwnAndBitwiseOnesAreNeverSent) {
  EXPECT_EQ(nccl_op(ReduceOp::kSum), ncclSum);
  EXPECT_EQ(nccl_op(ReduceOp::kAvg), ncclAvg);
  EXPECT_EQ(nccl_op(ReduceOp::kProduct), ncclProd);
  EXPECT_EQ(nccl_op(ReduceOp::kMin), ncclMin);
  EXPECT_EQ(nccl_op(ReduceOp::kMax), ncclMax);
  for (const auto op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    EXPECT_THROW(nccl_op(op), c10::Error) << reduce_op_name(op);
  }
}

TEST(NcclTypes, ANegativeSplitColorIsNcclsNoColor) {
  EXPECT_EQ(split_color(-1), NCCL_SPLIT_NOCOLOR);
  EXPECT_EQ(split_color(-7), NCCL_SPLIT_NOCOLOR);
  EXPECT_EQ(split_color(0), 0);
  EXPECT_EQ(split_color(3), 3);
}

}  // namespace
}  // namespace c10d_func::nccl
