#pragma once
// How a reduction travels, decided from the dtype and the reduction alone (torch-free, so it is
// tested on its own against a model of every transport's arithmetic: tests/cpp/wire_plan_test.cpp):
// complex as its real view, bool as uint8 with or/and semantics, int16/uint16 widened to int32
// and uint32/uint64 to int64, avg as a sum divided afterwards (truncating for integers, as NCCL
// does) unless the transport averages floats natively (NCCL). reduction_staging.h carries it
// out on tensors.
#include <c10/core/ScalarType.h>

#include "transports/reduce_op.h"

namespace c10d_func {

struct WirePlan {
  c10::ScalarType wire_dtype;  // the dtype on the wire (complex: its real counterpart)
  ReduceOp wire_op;            // never a bool-specific op: sum/avg/product/min/max/bitwise
  bool real_view = false;      // complex, moved as view_as_real (no copy)
  bool copy_back = false;      // the wire is a converted copy of the buffer
  bool divide = false;         // the wire holds a sum that avg must divide by the group size
  bool truncate = false;       // that division truncates (integers, as NCCL's integer avg)
};

// `reduce_op` must be defined for `dtype` (check_reduce_dtype).
WirePlan plan_wire(c10::ScalarType dtype, ReduceOp reduce_op, bool transport_averages_floats);

// True when reductions of `dtype` travel as a converted copy (bool, int16 and the unsigned types
// wider than a byte), so the wire tensor is not the buffer itself.
bool staged_as_copy(c10::ScalarType dtype);

// The bytes on the wire of a reduction of `bytes` bytes of `dtype`: twice as many for the dtypes
// widened (int16, uint16, uint32), else as many. Limits on what a step may carry apply to these.
int64_t wire_bytes(c10::ScalarType dtype, int64_t bytes);

}  // namespace c10d_func
