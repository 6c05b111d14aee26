#pragma once
// The NCCL transport: a Communicator per (tag, chunk, CUDA device) on a raw NCCL communicator
// with its own stream. See nccl_communicator.cpp.
#include "transports/communicator.h"
#include "transports/rendezvous.h"

#include <memory>

namespace c10d_func {

// Forms an NCCL communicator among the chunk's members through the rendezvous store.
std::shared_ptr<Communicator> make_nccl_communicator(const Rendezvous& rendezvous);

}  // namespace c10d_func
