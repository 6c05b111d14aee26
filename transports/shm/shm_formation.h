#pragma once
// Between forming (shm_formation.cpp) and the communicator (shm_communicator.cpp): the
// communicator made on a segment every member has mapped.
#include "transports/communicator.h"
#include "transports/rendezvous.h"
#include "transports/shm/shm_segment.h"

#include <memory>

namespace c10d_func::shm {

// `cross_memory`: every member can read every other's private memory (cross_memory.h).
std::shared_ptr<Communicator> communicator_on(SharedSegment segment, const Rendezvous& rendezvous,
                                              bool cross_memory);

}  // namespace c10d_func::shm
