// Reduction parsing and dtype rules; see reduce_op.h.
#include "transports/reduce_op.h"

#include <c10/util/Exception.h>

#include <array>
#include <utility>

namespace c10d_func {
namespace {

constexpr std::array<std::pair<std::string_view, ReduceOp>, 8> kNames{{
    {"sum", ReduceOp::kSum},
    {"avg", ReduceOp::kAvg},
    {"product", ReduceOp::kProduct},
    {"min", ReduceOp::kMin},
    {"max", ReduceOp::kMax},
    {"band", ReduceOp::kBand},
    {"bor", ReduceOp::kBor},
    {"bxor", ReduceOp::kBxor},
}};

bool is_reducible_float(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
    case c10::kDouble:
    case c10::kHalf:
    case c10::kBFloat16:
      return true;
    default:
      return false;
  }
}

bool is_integer(c10::ScalarType dtype) {
  return c10::isIntegralType(dtype, /*includeBool=*/false);
}

}  // namespace

ReduceOp parse_reduce_op(std::string_view op, std::string_view name) {
  // torch's funcol accepts upper-case names ("SUM"); so do we.
  std::string lowered(name);
  for (char& c : lowered) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const auto& [known, value] : kNames) {
    if (lowered == known) {
      return value;
    }
  }
  TORCH_CHECK(false, "c10d_func.", op,
              ": argument 'reduce_op' must be one of sum, avg, product, min, ",
              "max, band, bor, bxor; got '", name, "'");
}

const char* reduce_op_name(ReduceOp reduce_op) {
  for (const auto& [known, value] : kNames) {
    if (value == reduce_op) {
      return known.data();
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown ReduceOp");
}

bool is_bitwise(ReduceOp reduce_op) {
  return reduce_op == ReduceOp::kBand || reduce_op == ReduceOp::kBor ||
         reduce_op == ReduceOp::kBxor;
}

void check_reduce_dtype(std::string_view op, ReduceOp reduce_op, c10::ScalarType dtype) {
  const char* name = reduce_op_name(reduce_op);
  if (c10::isComplexType(dtype)) {
    TORCH_CHECK(
        (reduce_op == ReduceOp::kSum || reduce_op == ReduceOp::kAvg) && dtype != c10::kComplexHalf,
        "c10d_func.", op, ": reduce_op '", name, "' is not defined for dtype ", dtype,
        "; complex tensors (complex64, complex128) take sum and avg only");
    return;
  }
  if (dtype == c10::kBool) {
    TORCH_CHECK(reduce_op != ReduceOp::kAvg, "c10d_func.", op,
                ": reduce_op 'avg' is not defined for dtype bool");
    return;
  }
  if (is_bitwise(reduce_op)) {
    TORCH_CHECK(is_integer(dtype), "c10d_func.", op, ": bitwise reduce_op '", name,
                "' needs an integer or bool tensor, got dtype ", dtype);
    return;
  }
  TORCH_CHECK(
      is_reducible_float(dtype) || is_integer(dtype), "c10d_func.", op, ": reduce_op '", name,
      "' is not defined for dtype ", dtype,
      " (it can be moved by all_gather, all_to_all, broadcast, gather, scatter and permute)");
}

}  // namespace c10d_func
