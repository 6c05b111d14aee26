// Byte reductions; see byte_reduce.h.
#include "transports/byte_reduce.h"

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/complex.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace c10d_func {

namespace {

// The plain loop on one thread is as fast as ATen's vectorised kernels on one thread at every
// size for sums, products and bitwise reductions of 32- and 64-bit types, int8 and complex
// (measured on an AVX2 machine, two members: 4 KiB 0.4 against 1.1 µs, where wrapping each buffer
// in a tensor and building a TensorIterator costs about a microsecond; 1 MiB 30 against 31 µs).
// ATen would also start its intra-op threads for a large buffer, while the host's other ranks
// occupy the cores and reduce their own shares at the same time. min and max (a NaN test per
// element) and bf16/fp16 (converted element by element) are slower in the loop from 64 KiB
// (min/max: 34–64 against 31 µs at 1 MiB) and 16 KiB (bf16: 3.1 against 2.3 µs).
int64_t loop_bytes(c10::ScalarType dtype, ReduceOp op) {
  if (dtype == c10::kBFloat16 || dtype == c10::kHalf) {
    return int64_t{4} << 10;
  }
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    return int64_t{64} << 10;
  }
  return std::numeric_limits<int64_t>::max();
}

// What ATen computes for two elements, element by element: integer sums and products wrap
// (computed unsigned, where wrapping is defined), min and max propagate NaN, bf16/fp16 compute in
// float and round once. bool is read as bytes (a peer's byte other than 0 or 1 is not a valid
// bool): a sum or max is "or", a product or min "and", written as 0 or 1.
template <typename T>
struct Elementwise {
  static constexpr bool kReduced = std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;
  static constexpr bool kWrapping = std::is_integral_v<T>;
  using Unsigned =
      std::conditional_t<kWrapping, std::make_unsigned_t<std::conditional_t<kWrapping, T, int>>, T>;

  static T sum(T a, T b) {
    if constexpr (kWrapping) {
      return static_cast<T>(static_cast<Unsigned>(a) + static_cast<Unsigned>(b));
    } else if constexpr (kReduced) {
      return static_cast<T>(static_cast<float>(a) + static_cast<float>(b));
    } else {
      return a + b;
    }
  }
  static T product(T a, T b) {
    if constexpr (kWrapping) {
      return static_cast<T>(static_cast<Unsigned>(a) * static_cast<Unsigned>(b));
    } else if constexpr (kReduced) {
      return static_cast<T>(static_cast<float>(a) * static_cast<float>(b));
    } else {
      return a * b;
    }
  }
  // Branch-free, so the loop vectorises: `a != a` holds for NaN only (false for integers), and
  // a NaN on either side wins (when b is NaN, neither test takes a).
  static T min(T a, T b) { return (a < b) | (a != a) ? a : b; }
  static T max(T a, T b) { return (b < a) | (a != a) ? a : b; }
};

// out[i] = f(s0[i], s1[i]), then folds in the remaining sources; out may be s0. `f` is a lambda
// (its own type), so the loop inlines it and vectorises.
template <typename T, typename F>
void fold(T* out, const std::vector<const char*>& sources, int64_t count, F f) {
  const T* first = reinterpret_cast<const T*>(sources[0]);
  const T* second = reinterpret_cast<const T*>(sources[1]);
  for (int64_t i = 0; i < count; ++i) {
    out[i] = f(first[i], second[i]);
  }
  for (size_t s = 2; s < sources.size(); ++s) {
    const T* next = reinterpret_cast<const T*>(sources[s]);
    for (int64_t i = 0; i < count; ++i) {
      out[i] = f(out[i], next[i]);
    }
  }
}

// A bf16/fp16 sum over more than two members, accumulated in float and rounded once.
template <typename T>
void sum_in_float(T* out, const std::vector<const char*>& sources, int64_t count) {
  static thread_local std::vector<float> accumulator;
  accumulator.resize(static_cast<size_t>(count));
  const T* first = reinterpret_cast<const T*>(sources[0]);
  for (int64_t i = 0; i < count; ++i) {
    accumulator[i] = static_cast<float>(first[i]);  // not 0 + first: -0.0 stays -0.0
  }
  for (size_t s = 1; s < sources.size(); ++s) {
    const T* values = reinterpret_cast<const T*>(sources[s]);
    for (int64_t i = 0; i < count; ++i) {
      accumulator[i] += static_cast<float>(values[i]);
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<T>(accumulator[i]);
  }
}

bool bool_loop(void* dst, const std::vector<const char*>& sources, int64_t count, ReduceOp op) {
  auto* out = static_cast<uint8_t*>(dst);
  auto any = [](uint8_t a, uint8_t b) -> uint8_t { return (a | b) != 0; };
  auto all = [](uint8_t a, uint8_t b) -> uint8_t { return a != 0 && b != 0; };
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      fold(out, sources, count, any);
      return true;
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      fold(out, sources, count, all);
      return true;
    case ReduceOp::kBxor:
      fold(out, sources, count,
           [](uint8_t a, uint8_t b) -> uint8_t { return (a != 0) != (b != 0); });
      return true;
    case ReduceOp::kAvg:
      return false;  // not defined for bool (check_reduce_dtype)
  }
  return false;
}

template <typename T>
bool loop_of(void* dst, const std::vector<const char*>& sources, int64_t count, ReduceOp op) {
  using E = Elementwise<T>;
  T* out = static_cast<T*>(dst);
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {  // avg is staged as a sum; the caller divides
    if constexpr (E::kReduced) {
      if (sources.size() > 2) {
        sum_in_float(out, sources, count);
        return true;
      }
    }
    fold(out, sources, count, [](T a, T b) { return E::sum(a, b); });
    return true;
  }
  if constexpr (c10::is_complex<T>::value) {
    return false;  // complex takes sum and avg only (check_reduce_dtype)
  } else {
    switch (op) {
      case ReduceOp::kProduct:
        fold(out, sources, count, [](T a, T b) { return E::product(a, b); });
        return true;
      case ReduceOp::kMin:
        fold(out, sources, count, [](T a, T b) { return E::min(a, b); });
        return true;
      case ReduceOp::kMax:
        fold(out, sources, count, [](T a, T b) { return E::max(a, b); });
        return true;
      case ReduceOp::kBand:
      case ReduceOp::kBor:
      case ReduceOp::kBxor:
        if constexpr (std::is_integral_v<T>) {
          if (op == ReduceOp::kBand) {
            fold(out, sources, count, [](T a, T b) { return static_cast<T>(a & b); });
          } else if (op == ReduceOp::kBor) {
            fold(out, sources, count, [](T a, T b) { return static_cast<T>(a | b); });
          } else {
            fold(out, sources, count, [](T a, T b) { return static_cast<T>(a ^ b); });
          }
          return true;
        }
        return false;  // bitwise needs integers (check_reduce_dtype)
      default:
        return false;
    }
  }
}

}  // namespace

bool reduce_in_loop(void* dst, const std::vector<const char*>& sources, int64_t count,
                    c10::ScalarType dtype, ReduceOp op) {
  switch (dtype) {
    case c10::kFloat:
      return loop_of<float>(dst, sources, count, op);
    case c10::kDouble:
      return loop_of<double>(dst, sources, count, op);
    case c10::kBFloat16:
      return loop_of<c10::BFloat16>(dst, sources, count, op);
    case c10::kHalf:
      return loop_of<c10::Half>(dst, sources, count, op);
    case c10::kInt:
      return loop_of<int32_t>(dst, sources, count, op);
    case c10::kLong:
      return loop_of<int64_t>(dst, sources, count, op);
    case c10::kShort:
      return loop_of<int16_t>(dst, sources, count, op);
    case c10::kChar:
      return loop_of<int8_t>(dst, sources, count, op);
    case c10::kByte:
      return loop_of<uint8_t>(dst, sources, count, op);
    case c10::kBool:
      return bool_loop(dst, sources, count, op);
    case c10::kComplexFloat:
      return loop_of<c10::complex<float>>(dst, sources, count, op);
    case c10::kComplexDouble:
      return loop_of<c10::complex<double>>(dst, sources, count, op);
    default:
      return false;
  }
}

void reduce_with_aten(void* dst, const std::vector<const char*>& sources, int64_t count,
                      c10::ScalarType dtype, ReduceOp op) {
  const auto options = at::TensorOptions().dtype(dtype);
  at::Tensor out = at::from_blob(dst, {count}, options);
  auto view = [&](const char* p) { return at::from_blob(const_cast<char*>(p), {count}, options); };
  auto combine = [&](const at::Tensor& a, const at::Tensor& b) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:  // staged as a sum; the caller divides
        at::add_out(out, a, b);
        return;
      case ReduceOp::kProduct:
        at::mul_out(out, a, b);
        return;
      case ReduceOp::kMin:
        at::minimum_out(out, a, b);
        return;
      case ReduceOp::kMax:
        at::maximum_out(out, a, b);
        return;
      case ReduceOp::kBand:
        at::bitwise_and_out(out, a, b);
        return;
      case ReduceOp::kBor:
        at::bitwise_or_out(out, a, b);
        return;
      case ReduceOp::kBxor:
        at::bitwise_xor_out(out, a, b);
        return;
    }
  };
  const bool half = dtype == c10::kBFloat16 || dtype == c10::kHalf;
  if (half && sources.size() > 2 && (op == ReduceOp::kSum || op == ReduceOp::kAvg)) {
    // Sums of bf16/fp16 accumulate in fp32 and round once: rounding after every member's
    // addition loses what small contributions add up to (256 + 1 + 1 + 1 stays 256 in bf16).
    static thread_local at::Tensor accumulator;
    if (!accumulator.defined() || accumulator.numel() < count) {
      accumulator = at::empty({count}, at::TensorOptions().dtype(at::kFloat));
    }
    at::Tensor sum = accumulator.narrow(0, 0, count);
    sum.copy_(view(sources[0]));
    for (size_t i = 1; i < sources.size(); ++i) {
      sum.add_(view(sources[i]));
    }
    out.copy_(sum);
    return;
  }
  combine(view(sources[0]), view(sources[1]));
  for (size_t i = 2; i < sources.size(); ++i) {
    combine(out, view(sources[i]));
  }
}

void reduce_into(void* dst, std::vector<const char*> sources, int64_t count, c10::ScalarType dtype,
                 ReduceOp op) {
  if (count == 0) {
    return;
  }
  const auto aliased = std::find(sources.begin(), sources.end(), static_cast<const char*>(dst));
  if (aliased != sources.end()) {
    std::iter_swap(sources.begin(), aliased);
  }
  if (sources.size() == 1) {
    if (sources[0] != dst) {
      std::memcpy(dst, sources[0], static_cast<size_t>(count) * c10::elementSize(dtype));
    }
    return;
  }
  if (count * static_cast<int64_t>(c10::elementSize(dtype)) <= loop_bytes(dtype, op) &&
      reduce_in_loop(dst, sources, count, dtype, op)) {
    return;
  }
  reduce_with_aten(dst, sources, count, dtype, op);
}

}  // namespace c10d_func
