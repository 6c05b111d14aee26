#pragma once
// The hierarchy's scatter and gather of large messages on even hosts numbered host by host, along
// the root's rail: each other host's members' blocks (one contiguous run of the root's buffer)
// cross the network once, in one message per host over the link of the root's rail, where Gloo's
// scatter and gather run a pair per member. That host's member of the root's local index
// scatters them inside its host after receiving them (scatter), or gathers them inside its host
// before sending them (gather); the root's own host does the same with the root. The rails off
// the root's exchange headers only, so that members naming other roots fail on every rail, none
// at its timeout. For mid-sized messages (host_spanning_communicator.h says which).
#include <ATen/core/Tensor.h>

#include "transports/communicator.h"
#include "transports/hierarchy/host_placement.h"
#include "transports/hierarchy/rail_link.h"

namespace c10d_func {

// `output`: contiguous, this member's block; `input`: contiguous, as many blocks as members
// (read on `root` only); `rank`: this member's index; `local`: its host's communicator; `link`:
// its rail's. The placement must be even and host-major. Blocks; raises what a step raised.
void scatter_through_rail(const at::Tensor& output, const at::Tensor& input, int64_t root,
                          const HostPlacement& placement, int64_t rank, Communicator& local,
                          RailLink& link);

// `input`: contiguous, this member's block; `output`: contiguous, as many blocks as members
// (written on `root` only). Otherwise as scatter_through_rail.
void gather_through_rail(const at::Tensor& output, const at::Tensor& input, int64_t root,
                         const HostPlacement& placement, int64_t rank, Communicator& local,
                         RailLink& link);

}  // namespace c10d_func
