#pragma once
// A Communicator over any c10d::Backend: torch's ProcessGroupGloo for the CPU groups the registry
// creates, and whatever backend a user binds with register_group (Gloo, NCCL, third-party).
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "ops/communicator.h"

#include <memory>

namespace c10d_func {

std::shared_ptr<Communicator> make_backend_communicator(c10::intrusive_ptr<c10d::Backend> backend);

} // namespace c10d_func
