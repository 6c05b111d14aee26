#pragma once
// Between forming (shm_formation.cpp) and the communicator (shm_communicator.cpp): the
// communicator made on a segment every member has mapped.
#include "transports/communicator.h"
#include "transports/rendezvous.h"
#include "transports/shm/shm_segment.h"

#include <memory>

namespace c10d_func::shm {

std::shared_ptr<Communicator> communicator_on(SharedSegment segment, const Rendezvous& rendezvous);

}  // namespace c10d_func::shm
