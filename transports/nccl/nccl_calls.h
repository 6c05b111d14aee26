#pragma once
// Calling NCCL: its results turned into errors that name the call, and the polling of a
// non-blocking communicator against a deadline (a member that never arrives aborts the others
// instead of hanging).
#include <nccl.h>

#include <chrono>
#include <string>

namespace c10d_func::nccl {

using Clock = std::chrono::steady_clock;

// Raises "c10d_func: <what> failed: <NCCL's words> (<its last error>)".
[[noreturn]] void nccl_failed(const std::string& what, ncclResult_t result, ncclComm_t comm);

// A non-blocking communicator's last call finishes in the background: poll it, aborting the
// communicator once `deadline` passes.
void wait_until_ready(ncclComm_t comm, Clock::time_point deadline, const std::string& what);

// `result` of an NCCL call named `what`: done, in progress (polled until `deadline`), or raised.
void check(ncclResult_t result, ncclComm_t comm, Clock::time_point deadline,
           const std::string& what);

}  // namespace c10d_func::nccl
