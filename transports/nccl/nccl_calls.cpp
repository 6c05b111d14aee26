// Calling NCCL; see nccl_calls.h.
#include "transports/nccl/nccl_calls.h"

#include <c10/util/Exception.h>

#include <thread>

namespace c10d_func::nccl {

[[noreturn]] void nccl_failed(const std::string& what, ncclResult_t result, ncclComm_t comm) {
  const char* detail = ncclGetLastError(comm);
  TORCH_CHECK(false, "c10d_func: ", what, " failed: ", ncclGetErrorString(result),
              detail && *detail ? std::string(" (") + detail + ")" : std::string());
}

// A non-blocking communicator's last call finishes in the background: poll it, aborting the
// communicator once `deadline` passes.
void wait_until_ready(ncclComm_t comm, Clock::time_point deadline, const std::string& what) {
  // Enqueuing a collective finishes within microseconds: yield rather than sleep at first, so a
  // grouped call (send/recv, all_to_all) does not pay a scheduler tick; creation takes longer.
  const auto spin_until = Clock::now() + std::chrono::milliseconds(2);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) {
      nccl_failed(what, queried, comm);
    }
    if (state == ncclSuccess) {
      return;
    }
    if (state != ncclInProgress) {
      ncclCommAbort(comm);
      nccl_failed(what, state, nullptr);
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      TORCH_CHECK(false, "c10d_func: ", what, " did not complete within C10D_FUNC_TIMEOUT; the ",
                  "NCCL communicator was aborted (a member may be missing)");
    }
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void check(ncclResult_t result, ncclComm_t comm, Clock::time_point deadline,
           const std::string& what) {
  if (result == ncclSuccess) {
    return;
  }
  if (result == ncclInProgress) {
    wait_until_ready(comm, deadline, what);
    return;
  }
  nccl_failed(what, result, comm);
}

}  // namespace c10d_func::nccl
