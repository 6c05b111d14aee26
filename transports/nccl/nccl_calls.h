#pragma once
// Calling NCCL: its results turned into errors that name the call, the polling of a
// non-blocking communicator against a deadline (a member that never arrives aborts the others
// instead of hanging), and the maps from c10d_func's dtypes and reductions to NCCL's.
#include <c10/core/ScalarType.h>

#include <nccl.h>

#include "transports/reduce_op.h"

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

// The NCCL type of a staged wire tensor (staging has already widened what NCCL lacks).
ncclDataType_t nccl_dtype(c10::ScalarType dtype);

// NCCL's reduction; bitwise ones are composed (all-gather and a local reduction), never sent.
ncclRedOp_t nccl_op(ReduceOp reduce_op);

}  // namespace c10d_func::nccl
