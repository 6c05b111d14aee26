#pragma once
// The hierarchy's scatter of a large input on even hosts numbered host by host: the root sends
// each other host its members' blocks (one contiguous run of the input) once, over the link of
// the root's rail, to that host's member of the root's local index, which then scatters them
// inside its host (the root does the same on its own). Each block crosses the network once, as
// in Gloo's scatter, but in one message per host where Gloo runs a pair per member. The rails off
// the root's exchange headers only, so that members naming other roots fail on every rail, none
// at its timeout. For mid-sized messages (hierarchical_communicator.cpp says which).
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

}  // namespace c10d_func
