#pragma once
// How a reduction travels on any transport: the tensor on the wire and the reduction applied to
// it, chosen from the dtype so every transport gives the same results: complex as view_as_real,
// bool as uint8 with or/and semantics, int16/uint16 widened to int32 and uint32/uint64 to int64,
// avg as a sum divided afterwards (truncating for integers, as NCCL does) unless the transport
// averages floats natively. finish() brings the wire result back into the caller's buffer.
#include <ATen/core/Tensor.h>

#include "transports/reduce_op.h"

namespace c10d_func {

struct StagedReduction {
  at::Tensor wire;
  ReduceOp wire_op = ReduceOp::kSum;  // never a bool-specific op: sum/avg/product/min/max/bitwise
  bool copy_back = false;             // wire is a converted copy of the buffer
  bool divide = false;                // wire holds a sum that avg must divide

  bool needs_finish() const { return copy_back || divide; }
  // Call once the wire tensor holds the reduced values (on CUDA: on a stream ordered after it).
  void finish(const at::Tensor& buffer, int64_t group_size) const;
};

StagedReduction stage_reduction(const at::Tensor& buffer, ReduceOp reduce_op,
                                bool transport_averages_floats);

// True when reductions of `dtype` travel as a converted copy (bool, int16 and the unsigned types
// wider than a byte), so the wire tensor is not the buffer itself.
bool staged_as_copy(c10::ScalarType dtype);

}  // namespace c10d_func
