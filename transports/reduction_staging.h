#pragma once
// A reduction staged for the wire, as wire_plan.h decides it (the same on every transport, so
// every transport gives the same results): the tensor on the wire and the reduction applied to
// it. finish() brings the wire result back into the caller's buffer.
#include <ATen/core/Tensor.h>

#include "transports/reduce_op.h"
#include "transports/wire_plan.h"

namespace c10d_func {

struct StagedReduction {
  at::Tensor wire;
  ReduceOp wire_op = ReduceOp::kSum;  // never a bool-specific op: sum/avg/product/min/max/bitwise
  bool copy_back = false;             // wire is a converted copy of the buffer
  bool divide = false;                // wire holds a sum that avg must divide
  bool truncate = false;              // that division truncates (WirePlan::truncate)

  bool needs_finish() const { return copy_back || divide; }
  // Call once the wire tensor holds the reduced values (on CUDA: on a stream ordered after it).
  void finish(const at::Tensor& buffer, int64_t group_size) const;
};

StagedReduction stage_reduction(const at::Tensor& buffer, ReduceOp reduce_op,
                                bool transport_averages_floats);

}  // namespace c10d_func
