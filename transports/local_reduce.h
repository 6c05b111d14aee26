#pragma once
// Reduces a stack of contributions [members, ...] over dim 0 into `output`, with the library's
// reduction semantics (bool sum/max/bor = or, product/min/band = and; avg truncates integers).
// Used where a transport composes a reduction from data movement (reduce_scatter over all-to-all).
#include <ATen/core/Tensor.h>

#include "transports/reduce_op.h"

namespace c10d_func {

void reduce_stack_into(const at::Tensor& output, const at::Tensor& stacked, ReduceOp reduce_op);

}  // namespace c10d_func
