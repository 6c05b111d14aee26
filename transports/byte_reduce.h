#pragma once
// The reduction of several members' buffers into one, on raw memory (slots of a shared segment,
// the bytes of a rail link, the caller's tensors): shared by the transports that move bytes.
#include <c10/core/ScalarType.h>

#include "transports/reduce_op.h"

#include <cstdint>
#include <vector>

namespace c10d_func {

// dst = reduction over `sources` (count elements of `dtype` each): a plain loop on the calling
// thread (reduce_in_loop), but min/max beyond 64 KiB and bf16/fp16 beyond 4 KiB take ATen's
// vectorised kernels (reduce_with_aten). Sums of bf16/fp16 over more than two members
// accumulate in fp32 on both. `dst` may be one of the sources (an in-place reduction): that one
// is folded in first, before anything is written to it.
void reduce_into(void* dst, std::vector<const char*> sources, int64_t count, c10::ScalarType dtype,
                 ReduceOp op);

// The two ways, for tests that compare them. Both take at least two sources, the first of which
// may be `dst`. reduce_in_loop returns false, writing nothing, for a dtype it has no loop for (fp8,
// the unsigned types but uint8): reduce_with_aten takes every dtype check_reduce_dtype allows.
bool reduce_in_loop(void* dst, const std::vector<const char*>& sources, int64_t count,
                    c10::ScalarType dtype, ReduceOp op);
void reduce_with_aten(void* dst, const std::vector<const char*>& sources, int64_t count,
                      c10::ScalarType dtype, ReduceOp op);

}  // namespace c10d_func
