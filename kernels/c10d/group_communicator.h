#pragma once
// A Communicator over a c10d group: torch's ProcessGroupGloo for the CPU groups the registry
// creates, whatever backend a user binds with register_group (Gloo, NCCL, third-party), and a
// whole ProcessGroup when no C++ backend stands behind it: ProcessGroups written in Python (the
// threaded test group, a `Backend.register_backend` plugin) and fake ones, whose methods are the
// only way in, as torch's own functional collectives call them.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "ops/communicator.h"

#include <memory>

namespace c10d_func {

std::shared_ptr<Communicator> make_backend_communicator(c10::intrusive_ptr<c10d::Backend> backend);

// `owner` is held as long as the communicator and released after the group: the Python object of
// a group written in Python, whose methods are gone once it is collected. A group without a
// reduce of its own (torch's threaded test group has none) reduces through its all-reduce.
std::shared_ptr<Communicator> make_process_group_communicator(
    c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<void> owner = nullptr,
    bool has_reduce = true);

} // namespace c10d_func
