#pragma once
// Hierarchical collectives for a chunk whose members span hosts: shared memory inside each host,
// the across-hosts transport (Gloo) between hosts, so only the hops that must leave a host do.
//
// all_reduce up to 512 KiB, and at any size on uneven hosts (3 + 1): all-reduce inside each host,
//   all-reduce between the hosts' first members ("leaders": rail 0), broadcast inside each host.
//   Small messages cost steps and hand-offs, not bytes: one message per host crosses the
//   network, in one round.
// Even hosts (every host holds as many of the chunk's members), above 512 KiB:
//   all_reduce     = reduce-scatter inside each host, all-reduce between the members of equal
//                    local index (a "rail"), all-gather inside each host; between two hosts,
//                    pipelined in segments (one crossing the network on the link's thread while
//                    the host reduces the next and gathers the one before);
// and at every size:
//   reduce_scatter = reduce-scatter inside each host, then reduce-scatter along the rail;
//   all_gather     = all-gather along the rail (each member's own block), then inside each
//                    host, so each host's blocks cross the network once;
//   broadcast      = broadcast along the root's rail (the buffer crosses to each other host
//                    once), then inside each host from that rail's member;
//   all_to_all     = with or without split sizes, up to 512 KiB per member: inside each host,
//                    then along the rails (two_step_all_to_all.h);
//   reduce         = the all_reduce (only the root's result is kept; uneven hosts: up to 512 KiB);
//   gather         = the all_gather on even hosts up to 1 MiB of output (the others' copies go
//                    to a scratch buffer);
//   scatter        = the broadcast of the whole input on even hosts up to 256 KiB of it, each
//                    member keeping its block.
// With members numbered host by host, the steps inside a host of a large all_gather or
// reduce_scatter run once per host, straight on the caller's buffer (host_placement.h).
// Between hosts, a rail's all-reduce, all-gather and broadcast run over the rail's own TCP link
// (rail_link.h): one round of exchange; all-reduce at every size between two hosts, up to 1 MiB
// between more (above it, Gloo's ring sends fewer bytes); all-gather at every size (each block
// crosses to every other host once, as in a ring). Outputs and snapshots come from the host's
// symmetric memory (the shm communicator's pool), as on one host.
// Uneven hosts: all_gather, reduce_scatter, broadcast, all_to_all, gather and scatter run flat
// on the across-hosts transport over every member. Every call on it is issued in order with the
// queued collectives (StepsInOrder::in_order), since a queued all_to_all may issue one. Each
// collective's steps run one collective at a time in issue order, so every member issues its
// sub-communicators' collectives in the same order: on the communicator's own thread, or on the
// thread that waits the collective when it is next and nothing runs (it would block anyway, and a
// small collective then pays no hand-off between threads). Where the host's members' threads
// outnumber its cores, a small functional collective (up to 64 KiB) does not wake the
// communicator's thread: it is left to its waiter for a grace of 1 ms (TaskQueue::push_for_waiter;
// C10D_FUNC_WAITER_FIRST chooses). Whichever runs them runs the host's shm steps itself. reduce,
// gather and scatter run as other collectives carry their root into what the members compare
// (StepDetail, call_scope.h).
//
// Failures: the first failure of any step fails the communicator, and tells the members of this
// host waiting on this one through shared memory (so they fail at once, not at their timeout);
// then a roll call in the store (roll_call.h) names the members that are gone.
#include "transports/communicator.h"
#include "transports/hierarchy/host_placement.h"
#include "transports/hierarchy/rail_link.h"
#include "transports/rendezvous.h"
#include "transports/roll_call.h"

#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

// The communicator of `rendezvous`'s chunk, whose members' host identities are `host_ids` (in
// member order; more than one host). Forms a communicator of the member's host with `local`,
// of its rail with `across_hosts` (where used), and of every member with `across_hosts`. A chunk
// with no host holding two of its members gets the hosts' link beside the flat across-hosts
// communicator (linked_hosts_communicator.h), or that communicator alone where a member has no
// address its peers reach.
std::shared_ptr<Communicator> make_hierarchical(const Rendezvous& rendezvous,
                                                const std::vector<std::string>& host_ids,
                                                const CommunicatorFactory& local,
                                                const CommunicatorFactory& across_hosts);

// The communicator of a chunk whose hosts share members, from its formed parts (make_hierarchical,
// hierarchy_formation.cpp): `local` this member's host, `rail` its rail over Gloo (none on an
// uneven host's later members), `rail_link` that rail's link (none where a member has no
// address its peers reach), `flat` every member over Gloo; `members` the global ranks, for
// messages.
std::shared_ptr<Communicator> make_host_and_rail_communicator(
    int64_t rank, std::vector<int64_t> members, HostPlacement placement,
    std::shared_ptr<Communicator> local, std::shared_ptr<Communicator> rail,
    std::shared_ptr<Communicator> flat, std::unique_ptr<RailLink> rail_link,
    std::shared_ptr<FailureRollCall> roll_call);

}  // namespace c10d_func
