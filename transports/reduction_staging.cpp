// See reduction_staging.h.
#include "transports/reduction_staging.h"

#include <ATen/ATen.h>

namespace c10d_func {
namespace {

ReduceOp bool_wire_op(ReduceOp reduce_op) {
  switch (reduce_op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      return ReduceOp::kMax;  // logical or on 0/1
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      return ReduceOp::kMin;  // logical and on 0/1
    case ReduceOp::kBxor:
      return ReduceOp::kBxor;
    case ReduceOp::kAvg:
      break;
  }
  TORCH_INTERNAL_ASSERT(false, "avg on bool is rejected before it reaches a transport");
}

c10::ScalarType wire_dtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kBool:
      return c10::kByte;
    case c10::kShort:
    case c10::kUInt16:
      return c10::kInt;
    case c10::kUInt32:
    case c10::kUInt64:
      // Two's-complement int64 gives the same bits for sum/product/bitwise; min/max of uint64
      // values above 2**63 are the one case it cannot order (documented).
      return c10::kLong;
    default:
      return dtype;
  }
}

}  // namespace

void StagedReduction::finish(const at::Tensor& buffer, int64_t group_size) const {
  if (divide) {
    if (c10::isIntegralType(wire.scalar_type(), /*includeBool=*/false)) {
      wire.div_(group_size, "trunc");
    } else {
      wire.div_(group_size);
    }
  }
  if (copy_back) {
    buffer.copy_(wire);
  }
}

bool staged_as_copy(c10::ScalarType dtype) {
  return !c10::isComplexType(dtype) && wire_dtype(dtype) != dtype;
}

StagedReduction stage_reduction(const at::Tensor& buffer, ReduceOp reduce_op,
                                bool transport_averages_floats) {
  StagedReduction staged;
  const auto dtype = buffer.scalar_type();
  staged.wire_op = dtype == c10::kBool ? bool_wire_op(reduce_op) : reduce_op;
  if (c10::isComplexType(dtype)) {
    staged.wire = at::view_as_real(buffer);  // shares storage: nothing to copy back
  } else if (staged_as_copy(dtype)) {
    staged.wire = buffer.to(wire_dtype(dtype));
    staged.copy_back = true;
  } else {
    staged.wire = buffer;
  }
  if (staged.wire_op == ReduceOp::kAvg) {
    const bool floating = at::isFloatingType(staged.wire.scalar_type());
    if (!(transport_averages_floats && floating)) {
      staged.wire_op = ReduceOp::kSum;
      staged.divide = true;
    }
  }
  return staged;
}

}  // namespace c10d_func
