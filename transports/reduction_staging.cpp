// See reduction_staging.h.
#include "transports/reduction_staging.h"

#include <ATen/ATen.h>

namespace c10d_func {

void StagedReduction::finish(const at::Tensor& buffer, int64_t group_size) const {
  if (divide) {
    if (truncate) {
      wire.div_(group_size, "trunc");
    } else {
      wire.div_(group_size);
    }
  }
  if (copy_back) {
    buffer.copy_(wire);
  }
}

StagedReduction stage_reduction(const at::Tensor& buffer, ReduceOp reduce_op,
                                bool transport_averages_floats) {
  const WirePlan plan = plan_wire(buffer.scalar_type(), reduce_op, transport_averages_floats);
  StagedReduction staged;
  staged.wire_op = plan.wire_op;
  staged.copy_back = plan.copy_back;
  staged.divide = plan.divide;
  staged.truncate = plan.truncate;
  if (plan.real_view) {
    staged.wire = at::view_as_real(buffer);  // shares storage: nothing to copy back
  } else if (plan.copy_back) {
    staged.wire = buffer.to(plan.wire_dtype);
  } else {
    staged.wire = buffer;
  }
  return staged;
}

}  // namespace c10d_func
