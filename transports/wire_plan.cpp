// See wire_plan.h.
#include "transports/wire_plan.h"

#include <c10/util/Exception.h>

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

c10::ScalarType converted_dtype(c10::ScalarType dtype) {
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

bool staged_as_copy(c10::ScalarType dtype) {
  return !c10::isComplexType(dtype) && converted_dtype(dtype) != dtype;
}

int64_t wire_bytes(c10::ScalarType dtype, int64_t bytes) {
  if (!staged_as_copy(dtype)) {
    return bytes;
  }
  return bytes / static_cast<int64_t>(c10::elementSize(dtype)) *
         static_cast<int64_t>(c10::elementSize(converted_dtype(dtype)));
}

WirePlan plan_wire(c10::ScalarType dtype, ReduceOp reduce_op, bool transport_averages_floats) {
  WirePlan plan{dtype, dtype == c10::kBool ? bool_wire_op(reduce_op) : reduce_op};
  if (c10::isComplexType(dtype)) {
    plan.wire_dtype = c10::toRealValueType(dtype);
    plan.real_view = true;
  } else if (staged_as_copy(dtype)) {
    plan.wire_dtype = converted_dtype(dtype);
    plan.copy_back = true;
  }
  if (plan.wire_op == ReduceOp::kAvg &&
      !(transport_averages_floats && c10::isFloatingType(plan.wire_dtype))) {
    plan.wire_op = ReduceOp::kSum;
    plan.divide = true;
    plan.truncate = c10::isIntegralType(plan.wire_dtype, /*includeBool=*/false);
  }
  return plan;
}

}  // namespace c10d_func
