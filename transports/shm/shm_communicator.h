#pragma once
// The shm transport: collectives between the processes of one host through one shared-memory
// segment per communicator. See shm_communicator.cpp for the algorithms and the waiting rules.
#include "transports/communicator.h"
#include "transports/rendezvous.h"

#include <memory>

namespace c10d_func {

// Forms the communicator of `rendezvous`'s chunk; every member must be on this host (the "shm"
// transport raises naming the members that are not).
std::shared_ptr<Communicator> make_shm_communicator(const Rendezvous& rendezvous);

// The CPU default ("auto"): members exchange their host identity through the store; a chunk on
// one host gets the shm transport, a chunk spanning hosts gets `across_hosts` (Gloo).
std::shared_ptr<Communicator> make_local_or(const Rendezvous& rendezvous,
                                            const CommunicatorFactory& across_hosts);

}  // namespace c10d_func
