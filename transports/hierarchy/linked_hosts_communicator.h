#pragma once
// The communicator of a chunk with one member on each host (torchrun --nproc-per-node 1 across
// hosts, or pairs of ranks on two hosts): nothing to share inside a host, so the hierarchy's
// link between the hosts (rail_link.h) carries what it carries best, in one round of exchange
// from the calling thread when it waits (steps_in_order.h) instead of through Gloo's ring and
// thread:
//   all_reduce     between two hosts at every size (each side sends its buffer once, folded in
//                  place as the peer's arrives), between more up to 1 MiB;
//   all_gather     at every size, each block straight into the receivers' rows;
//   broadcast      at every size, the root sending straight into the others' buffers;
//   all_to_all     of equal blocks at every size, each block straight into its place;
//   reduce_scatter between two hosts, each side sending only the block the other keeps;
//   reduce         as the all_reduce, where the link serves that (only the root keeps it);
//   gather         as the all_gather up to 1 MiB of output (the root receives each block once);
//   scatter        as the broadcast of the whole input up to 256 KiB of it.
// The rest (and all_reduce and reduce above 1 MiB between more than two hosts, reduce_scatter
// between more) runs on Gloo over every member. A failure names the members that are gone
// (roll_call.h).
#include "transports/communicator.h"
#include "transports/hierarchy/rail_link.h"
#include "transports/roll_call.h"

#include <memory>

namespace c10d_func {

// `flat`: Gloo over every member; `link`: connected over every member in host order (member m
// on host m); `rank`: this member's index.
std::shared_ptr<Communicator> make_linked_hosts(int64_t rank, std::shared_ptr<Communicator> flat,
                                                std::unique_ptr<RailLink> link,
                                                std::shared_ptr<FailureRollCall> roll_call);

}  // namespace c10d_func
