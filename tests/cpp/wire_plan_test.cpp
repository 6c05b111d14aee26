// wire_plan: what a reduction travels as, checked by running three members' values through the
// plan with a model of the wire's arithmetic (the wire dtype's width, the wire reduction, NCCL's
// float avg where the transport averages floats, the division after the wire, the copy back)
// and comparing with the library's definition of the reduction, computed directly. Every dtype
// and reduction the library accepts, for the CPU transports and for NCCL.
#include "transports/wire_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace c10d_func {
namespace {

constexpr int64_t kMembers = 3;

const std::vector<c10::ScalarType> kDtypes = {
    c10::kBool,     c10::kByte,   c10::kChar,   c10::kShort,        c10::kInt,
    c10::kLong,     c10::kUInt16, c10::kUInt32, c10::kUInt64,       c10::kHalf,
    c10::kBFloat16, c10::kFloat,  c10::kDouble, c10::kComplexFloat, c10::kComplexDouble};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct,
                                    ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kBand,
                                    ReduceOp::kBor, ReduceOp::kBxor};

bool accepted(ReduceOp op, c10::ScalarType dtype) {
  try {
    check_reduce_dtype("all_reduce", op, dtype);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

// An integer as a value of `dtype` holds it: two's complement, wrapped to its width.
int64_t wrapped(int64_t value, c10::ScalarType dtype) {
  const auto bits = static_cast<uint64_t>(value);
  switch (dtype) {
    case c10::kBool:
      return value != 0 ? 1 : 0;
    case c10::kByte:
      return static_cast<uint8_t>(bits);
    case c10::kChar:
      return static_cast<int8_t>(bits);
    case c10::kShort:
      return static_cast<int16_t>(bits);
    case c10::kUInt16:
      return static_cast<uint16_t>(bits);
    case c10::kInt:
      return static_cast<int32_t>(bits);
    case c10::kUInt32:
      return static_cast<uint32_t>(bits);
    default:
      return value;  // 64 bits: the arithmetic below already wraps there
  }
}

int64_t add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t multiply(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// `op` over `values` with integer arithmetic of `dtype`'s width (avg: the sum, truncated).
int64_t reduce_integers(ReduceOp op, const std::vector<int64_t>& values, c10::ScalarType dtype) {
  int64_t result = values.front();
  for (size_t i = 1; i < values.size(); ++i) {
    const int64_t v = values[i];
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        result = add(result, v);
        break;
      case ReduceOp::kProduct:
        result = multiply(result, v);
        break;
      case ReduceOp::kMin:
        result = std::min(result, v);
        break;
      case ReduceOp::kMax:
        result = std::max(result, v);
        break;
      case ReduceOp::kBand:
        result &= v;
        break;
      case ReduceOp::kBor:
        result |= v;
        break;
      case ReduceOp::kBxor:
        result ^= v;
        break;
    }
    result = wrapped(result, dtype);
  }
  if (op == ReduceOp::kAvg) {
    result = wrapped(result / static_cast<int64_t>(values.size()), dtype);
  }
  return result;
}

double reduce_floats(ReduceOp op, const std::vector<double>& values) {
  double result = values.front();
  for (size_t i = 1; i < values.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        result += values[i];
        break;
      case ReduceOp::kProduct:
        result *= values[i];
        break;
      case ReduceOp::kMin:
        result = std::min(result, values[i]);
        break;
      case ReduceOp::kMax:
        result = std::max(result, values[i]);
        break;
      default:
        ADD_FAILURE() << "no bitwise reduction of floats";
    }
  }
  return op == ReduceOp::kAvg ? result / static_cast<double>(values.size()) : result;
}

// The library's definition, directly: bool sum/max/bor are or, product/min/band are and, bxor
// is parity; integers wrap at their width and avg truncates; floats (and complex, per part) are
// exact for these small values.
double reference(ReduceOp op, c10::ScalarType dtype, const std::vector<int64_t>& values) {
  if (dtype == c10::kBool) {
    int64_t ones = 0;
    for (int64_t v : values) {
      ones += v;
    }
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBor:
        return ones > 0;
      case ReduceOp::kProduct:
      case ReduceOp::kMin:
      case ReduceOp::kBand:
        return ones == static_cast<int64_t>(values.size());
      default:
        return ones % 2;
    }
  }
  if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
    return static_cast<double>(reduce_integers(op, values, dtype));
  }
  return reduce_floats(op, std::vector<double>(values.begin(), values.end()));
}

// The same values through `plan`: converted to the wire dtype, reduced on the wire, divided
// after it where the plan says, converted back.
double through_the_wire(const WirePlan& plan, c10::ScalarType dtype,
                        const std::vector<int64_t>& values, bool transport_averages_floats) {
  const c10::ScalarType wire = plan.wire_dtype;
  if (c10::isFloatingType(wire)) {
    if (plan.wire_op == ReduceOp::kAvg) {
      EXPECT_TRUE(transport_averages_floats) << "avg sent to a transport that cannot average";
    }
    double result = reduce_floats(plan.wire_op, std::vector<double>(values.begin(), values.end()));
    if (plan.divide) {
      result = plan.truncate ? std::trunc(result / kMembers) : result / kMembers;
    }
    return result;
  }
  EXPECT_NE(plan.wire_op, ReduceOp::kAvg) << "integer avg travels as a sum";
  std::vector<int64_t> on_wire;
  for (int64_t v : values) {
    on_wire.push_back(wrapped(v, wire));
  }
  int64_t result = reduce_integers(plan.wire_op, on_wire, wire);
  if (plan.divide) {
    EXPECT_TRUE(plan.truncate) << "integer avg must truncate";
    result = result / kMembers;
  }
  return static_cast<double>(wrapped(result, dtype));  // the copy back
}

// Values that exercise the dtype: small ones for every reduction, and large ones whose sum and
// product need the width of the dtype itself (a narrower wire would wrap them differently).
std::vector<std::vector<int64_t>> value_sets(c10::ScalarType dtype) {
  if (dtype == c10::kBool) {
    return {{1, 0, 1}, {1, 1, 1}, {0, 0, 0}};
  }
  std::vector<std::vector<int64_t>> sets = {{6, 3, 5}};
  switch (dtype) {
    case c10::kByte:
      sets.push_back({200, 100, 250});
      break;
    case c10::kChar:
      sets.push_back({100, -90, 120});
      break;
    case c10::kShort:
      sets.push_back({30000, -20000, 32000});
      break;
    case c10::kUInt16:
      sets.push_back({60000, 50000, 65000});
      break;
    case c10::kInt:
      sets.push_back({2000000000, -1500000000, 2100000000});
      break;
    case c10::kUInt32:
      sets.push_back({4000000000, 3000000000, 4200000000});
      break;
    case c10::kLong:
    case c10::kUInt64:
      sets.push_back({4000000000000000000, 3000000000000000000, 1000000000000000000});
      break;
    default:
      break;
  }
  return sets;
}

void check_every_reduction(bool transport_averages_floats) {
  int checked = 0;
  for (const auto dtype : kDtypes) {
    for (const auto op : kOps) {
      if (!accepted(op, dtype)) {
        continue;
      }
      const WirePlan plan = plan_wire(dtype, op, transport_averages_floats);
      const std::string what = std::string(reduce_op_name(op)) + " of " + c10::toString(dtype);
      if (c10::isComplexType(dtype)) {
        EXPECT_TRUE(plan.real_view) << what;
        EXPECT_EQ(plan.wire_dtype, c10::toRealValueType(dtype)) << what;
      }
      EXPECT_EQ(plan.copy_back, staged_as_copy(dtype)) << what;
      EXPECT_FALSE(plan.real_view && plan.copy_back) << what;
      const auto sets = value_sets(dtype);
      for (size_t set = 0; set < sets.size(); ++set) {
        const auto& values = sets[set];
        // The large values' sum overflows the dtype: an avg of them is exact where the wire is
        // wider (int16, uint16, uint32) and of the wrapped sum where it is not
        // (docs/collectives.md).
        if (op == ReduceOp::kAvg && set > 0) {
          continue;
        }
        EXPECT_EQ(through_the_wire(plan, dtype, values, transport_averages_floats),
                  reference(op, dtype, values))
            << what << " over " << values[0] << ", " << values[1] << ", " << values[2];
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(WirePlan, EveryReductionOfEveryDtypeOnTheCpuTransports) {
  check_every_reduction(/*transport_averages_floats=*/false);
}

TEST(WirePlan, EveryReductionOfEveryDtypeOnNccl) {
  check_every_reduction(/*transport_averages_floats=*/true);
}

TEST(WirePlan, NcclAveragesFloatsNativelyAndIntegersAsATruncatedSum) {
  const WirePlan floats = plan_wire(c10::kBFloat16, ReduceOp::kAvg, true);
  EXPECT_EQ(floats.wire_op, ReduceOp::kAvg);
  EXPECT_FALSE(floats.divide);
  const WirePlan complex = plan_wire(c10::kComplexFloat, ReduceOp::kAvg, true);
  EXPECT_EQ(complex.wire_op, ReduceOp::kAvg);
  EXPECT_FALSE(complex.divide);
  const WirePlan integers = plan_wire(c10::kInt, ReduceOp::kAvg, true);
  EXPECT_EQ(integers.wire_op, ReduceOp::kSum);
  EXPECT_TRUE(integers.divide && integers.truncate);
  const WirePlan cpu = plan_wire(c10::kFloat, ReduceOp::kAvg, false);
  EXPECT_EQ(cpu.wire_op, ReduceOp::kSum);
  EXPECT_TRUE(cpu.divide);
  EXPECT_FALSE(cpu.truncate);
}

TEST(WirePlan, BitwiseReductionsStayBitwiseForTheTransportToCompose) {
  for (const auto op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    EXPECT_TRUE(is_bitwise(plan_wire(c10::kLong, op, true).wire_op));
  }
  EXPECT_TRUE(is_bitwise(plan_wire(c10::kBool, ReduceOp::kBxor, true).wire_op));
  // bool's or/and travel as max/min, which NCCL has.
  EXPECT_EQ(plan_wire(c10::kBool, ReduceOp::kBor, true).wire_op, ReduceOp::kMax);
  EXPECT_EQ(plan_wire(c10::kBool, ReduceOp::kBand, true).wire_op, ReduceOp::kMin);
}

// What a step's size limit is measured in: the bytes of the wire, twice the buffer's for the
// dtypes widened, the buffer's for the others (bool travels as uint8, complex as its real view).
TEST(WirePlan, WireBytesCountTheWidenedCopy) {
  for (const auto dtype : kDtypes) {
    const int64_t bytes = 6 * static_cast<int64_t>(c10::elementSize(dtype));
    const bool widened = dtype == c10::kShort || dtype == c10::kUInt16 || dtype == c10::kUInt32;
    EXPECT_EQ(wire_bytes(dtype, bytes), widened ? 2 * bytes : bytes) << c10::toString(dtype);
  }
}

}  // namespace
}  // namespace c10d_func
