#pragma once
// c10d_func's names in NCCL's: the wire dtypes (after reduction staging, wire_plan.h), the
// reductions, and a split's color. Header-only, needing nccl.h and nothing to link, so the
// GoogleTest binary checks them without a GPU (tests/cpp/nccl_types_test.cpp, CUDA builds).
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <nccl.h>

#include "transports/reduce_op.h"

#include <cstdint>

namespace c10d_func::nccl {

// The NCCL type of a staged wire tensor (staging has already widened what NCCL lacks).
inline ncclDataType_t nccl_dtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return ncclFloat32;
    case c10::kDouble:
      return ncclFloat64;
    case c10::kHalf:
      return ncclFloat16;
    case c10::kBFloat16:
      return ncclBfloat16;
    case c10::kChar:
      return ncclInt8;
    case c10::kByte:
      return ncclUint8;
    case c10::kInt:
      return ncclInt32;
    case c10::kLong:
      return ncclInt64;
    default:
      TORCH_INTERNAL_ASSERT(false, "no NCCL reduction dtype for ", dtype, " after staging");
  }
}

inline ncclRedOp_t nccl_op(ReduceOp reduce_op) {
  switch (reduce_op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    default:
      TORCH_INTERNAL_ASSERT(false, "bitwise reductions are composed, not sent to NCCL");
  }
}

// A split's color: a negative one takes part in the split call but in no part.
inline int split_color(int64_t color) {
  return color < 0 ? NCCL_SPLIT_NOCOLOR : static_cast<int>(color);
}

}  // namespace c10d_func::nccl
