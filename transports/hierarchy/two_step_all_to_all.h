#pragma once
// The hierarchy's all_to_all of equal blocks on even hosts, in two steps: inside the host, each
// member hands every local member its blocks for the members of that local index on every host
// (one shm all_to_all); then along each rail, over its link, each member sends every other host
// what its host has for that host's member of the same local index (one round). Every block
// crosses the network once, in two rounds where Gloo runs a pair per member. For small and
// medium messages (hierarchical_communicator.cpp says up to what size).
#include <ATen/core/Tensor.h>

#include "transports/communicator.h"
#include "transports/hierarchy/host_placement.h"
#include "transports/hierarchy/rail_link.h"

namespace c10d_func {

// `input` and `output`: contiguous, block j of each for chunk member j (as many blocks as
// members); `rank`: this member's index; `local`: its host's communicator; `link`: its rail's.
// Blocks; raises what a step raised.
void all_to_all_in_two_steps(const at::Tensor& output, const at::Tensor& input,
                             const HostPlacement& placement, int64_t rank, Communicator& local,
                             RailLink& link);

}  // namespace c10d_func
