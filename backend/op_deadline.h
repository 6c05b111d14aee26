#pragma once
// Per-call timeouts: the `timeout` of c10d's Options (AllreduceOptions.timeout, a barrier's
// timeout=...). The transports bound every wait by the group's timeout; a call that carries its
// own is bounded here: if it has not completed when its timeout passes, it fails there, with a
// roll call naming the members that are missing, and its communicator is marked failed (its
// members are out of step, as after any failed collective). One thread serves every deadline
// of the process; a call with no timeout of its own costs nothing here.
#include "transports/communicator.h"
#include "transports/rendezvous.h"

#include <chrono>
#include <memory>
#include <string>

namespace c10d_func {

struct OpDeadline {
  std::chrono::milliseconds timeout;
  std::string what;      // "allreduce on process group '1' (ranks [0, 1])"
  Rendezvous roll_call;  // the group's store (a private connection), rank and members
  std::string occasion;  // the call's name in the roll call, the same on every member
  std::weak_ptr<Communicator> communicator;
};

// A Completion that finishes as `upstream` does, or fails when `deadline.timeout` has passed
// first. A member whose `upstream` fails first answers the roll call, so the member whose
// deadline passed does not name it. CPU Completions only (a device Future's events stay with
// the transport's own watchdog).
Completion bounded_by(const Completion& upstream, OpDeadline deadline);

}  // namespace c10d_func
