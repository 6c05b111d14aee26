#pragma once
// Between forming (shm_formation.cpp) and the communicator (shm_communicator.cpp): the
// communicator made on a segment every member has mapped.
#include "transports/communicator.h"
#include "transports/rendezvous.h"
#include "transports/shm/shm_segment.h"

#include <sys/types.h>

#include <memory>
#include <vector>

namespace c10d_func::shm {

// What forming checked in the segment, handed on as checked: any process that maps the segment
// can write it again after the check, so nothing here is read from the segment twice.
struct CheckedSegment {
  size_t chunk_bytes = 0;   // the header's, within the mapped size
  size_t region_bytes = 0;  // likewise
  std::vector<pid_t> pids;  // each member's, positive
};

// `cross_memory`: every member can read every other's private memory (cross_memory.h).
std::shared_ptr<Communicator> communicator_on(SharedSegment segment, const Rendezvous& rendezvous,
                                              const CheckedSegment& checked, bool cross_memory);

}  // namespace c10d_func::shm
