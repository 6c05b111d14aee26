#pragma once
// The communicator of a chunk with one member (world size 1, or group_size 1): every collective
// is the identity on its one contribution, so it is done with at most one local copy, on the
// caller's thread (and, for CUDA tensors, on the caller's current stream), and is complete when
// the call returns. No transport, thread or store is involved.
#include "transports/communicator.h"

#include <memory>

namespace c10d_func {

std::shared_ptr<Communicator> make_solo_communicator();

}  // namespace c10d_func
