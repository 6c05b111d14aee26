#pragma once
// all_reduce of a sparse COO tensor, as Gloo does it (torch's only other backend that has one):
// every member's coalesced indices and values are gathered and summed, and the caller's tensor
// becomes the coalesced sum. Gathered in three collectives of the group's communicator: each
// member's shape and number of entries (which the call waits for, so the next two, padded to
// the largest member's count, are issued inside the call and keep the group's order), then the
// indices and the values. SUM only, as on Gloo.
#include "transports/communicator.h"

#include <ATen/core/Tensor.h>

#include <string>

namespace c10d_func {

// Issues the all_reduce of `tensor` (sparse COO, CPU) on `communicator`; the Completion is done
// once `tensor` holds the sum. `what` names the call in errors ("allreduce on process group
// '1' (ranks [0, 1])").
Completion sparse_all_reduce(Communicator& communicator, const at::Tensor& tensor,
                             const std::string& what);

}  // namespace c10d_func
