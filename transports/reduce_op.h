#pragma once
// The reduction names of the schemas ("sum", "avg", ...) and which dtypes each one accepts.
// Parsed once per call; the dtype rules are the library's, whatever the transport supports
// (a transport composes what it lacks).
#include <c10/core/ScalarType.h>

#include <string_view>

namespace c10d_func {

enum class ReduceOp { kSum, kAvg, kProduct, kMin, kMax, kBand, kBor, kBxor };

ReduceOp parse_reduce_op(std::string_view op, std::string_view name);
const char* reduce_op_name(ReduceOp reduce_op);
bool is_bitwise(ReduceOp reduce_op);

// Raises, naming op, reduction and dtype, when `reduce_op` is not defined for `dtype`:
// bitwise ops need integer or bool; complex takes sum and avg only; avg is not defined for bool;
// fp8 and other exotic dtypes can be moved but not reduced.
void check_reduce_dtype(std::string_view op, ReduceOp reduce_op, c10::ScalarType dtype);

}  // namespace c10d_func
