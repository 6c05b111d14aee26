#pragma once
// all_to_all across hosts on the transport's own steps, with or without split sizes (a caller
// that passed none passes even ones: members may mix the two, as torch's backends allow).
//
// On even hosts, in two steps: inside the host, each member hands every local member its parts
// for the members of that local index on every host (one shm all_to_all); then along each rail,
// over its link, each member sends every other host what its host has for that host's member of
// the same local index (one round). Every part crosses the network once, in two rounds where
// Gloo runs a pair per member. The parts' sizes differ per member, so the host's members first
// share theirs (one small shm all_gather): a member forwards parts whose sizes only their
// senders know. For small and medium messages; larger ones go on flat Gloo, every member reaching
// the same choice (two_step_all_to_all.cpp says how).
#include <ATen/core/Tensor.h>

#include "transports/communicator.h"
#include "transports/hierarchy/host_placement.h"
#include "transports/hierarchy/rail_link.h"

#include <vector>

namespace c10d_func {

// Each member's part of an all_to_all's `tensor` (contiguous; `row_splits` count its dim-0
// rows, one entry per member, as Communicator::all_to_all's), as bytes: views of `tensor`.
std::vector<at::Tensor> parts_of(const at::Tensor& tensor, const std::vector<int64_t>& row_splits);

// The whole all_to_all of `input` into `output` (contiguous; split sizes count dim-0 rows, as
// Communicator::all_to_all's) on even hosts whose rails all have their links: the host's members
// share their parts' sizes through `local` (every pair inside the host checked: a pair that does
// not match fails the whole host, which tells the other hosts through `link` at once), then the
// two steps (`local`, then `link`, this member's rail's) up to kTwoStepAllToAllBytes per member,
// or `flat`'s all_to_all above (called and waited here: the caller keeps it in order with its
// other calls on `flat`), once every pair between the hosts is checked over `link` (none goes to
// Gloo with sizes that do not pair up, where it would wait until the timeout). Pairs between hosts
// that do not match fail on both sides of a rail in the steps (each rail's parts, sizes and
// order, are compared). `ranks`: the members' global ranks, for messages. Blocks; raises what a
// step raised.
void all_to_all_across_hosts(const at::Tensor& output, const at::Tensor& input,
                             const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes,
                             const HostPlacement& placement, int64_t rank,
                             const std::vector<int64_t>& ranks, Communicator& local, RailLink& link,
                             Communicator& flat);

}  // namespace c10d_func
