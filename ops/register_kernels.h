#pragma once
// The list of operators, written once, and the registration of one kernel per operator for a
// dispatch key: kernels/cpu and kernels/cuda register the device-generic kernels of
// kernels/collective_kernels, meta/ its own.
#include <torch/library.h>

#define C10D_FUNC_FOR_EACH_OP(X)      \
  X(all_reduce)                       \
  X(all_reduce_)                      \
  X(all_reduce_coalesced)             \
  X(all_reduce_coalesced_)            \
  X(all_gather_into_tensor)           \
  X(all_gather_into_tensor_out)       \
  X(all_gather_into_tensor_coalesced) \
  X(reduce_scatter_tensor)            \
  X(reduce_scatter_tensor_out)        \
  X(reduce_scatter_tensor_coalesced)  \
  X(all_to_all_single)                \
  X(broadcast)                        \
  X(broadcast_)                       \
  X(reduce)                           \
  X(gather)                           \
  X(scatter)                          \
  X(permute)                          \
  X(isend)                            \
  X(irecv)                            \
  X(batch_p2p_ops)                    \
  X(wait_tensor)

// Registers, for every operator, the function of the same name found by unqualified lookup
// where the macro is expanded.
#define C10D_FUNC_IMPL_ONE(name) m.impl(#name, &name);
#define C10D_FUNC_IMPL_EVERY_OP(m) C10D_FUNC_FOR_EACH_OP(C10D_FUNC_IMPL_ONE)
