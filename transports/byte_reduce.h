#pragma once
// The reduction of several members' buffers into one, on raw memory (slots of a shared segment,
// the bytes of a rail link, the caller's tensors): shared by the transports that move bytes.
#include <c10/core/ScalarType.h>

#include "transports/reduce_op.h"

#include <cstdint>
#include <vector>

namespace c10d_func {

// dst = reduction over `sources` (count elements of `dtype` each). ATen's kernels are vectorised;
// sums of bf16/fp16 over more than two members accumulate in fp32.
// `dst` may be one of the sources (an in-place reduction): that one is folded in first, before
// anything is written to it.
void reduce_into(void* dst, std::vector<const char*> sources, int64_t count, c10::ScalarType dtype,
                 ReduceOp op);

}  // namespace c10d_func
