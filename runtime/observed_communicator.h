#pragma once
// Every communicator a group runs on is observed: its collectives reach torch's flight recorder,
// torch.profiler and c10d_func.groups()'s counters through the group's GroupObserver
// (group_observer.h), whatever the transport (shm, Gloo, the hierarchy, NCCL, a bound
// ProcessGroup, a group of one). Applied where the registry and the backend take a communicator
// into use; the parts a composite transport is made of are not observed on their own.
#include "runtime/group_observer.h"
#include "transports/communicator.h"

#include <memory>

namespace c10d_func {

// `inner`, observed as `identity`; `inner` itself where it is already observed.
std::shared_ptr<Communicator> observed(std::shared_ptr<Communicator> inner, GroupIdentity identity,
                                       std::chrono::milliseconds timeout);

// The observer of `communicator`, where it is observed (a backend's messages are recorded with
// its collectives, under one group).
std::shared_ptr<GroupObserver> observer_of(const std::shared_ptr<Communicator>& communicator);

}  // namespace c10d_func
