// The NCCL watchdog; see nccl_watchdog.h.
#include "transports/nccl/nccl_watchdog.h"

#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <cuda_runtime_api.h>

#include <thread>

namespace c10d_func::nccl {

void Watchdog::loop() {
  // While another thread captures a CUDA graph in the global mode (torch's default), querying an
  // event from this thread would be refused and would invalidate that capture; in the relaxed
  // mode this thread may query events recorded outside the capture.
  c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::deque<Entry> pending;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending.swap(entries_);
    }
    std::deque<Entry> unfinished;
    for (auto& entry : pending) {
      auto communicator = entry.communicator.lock();
      if (!communicator) {
        continue;
      }
      // An exception escaping this thread would terminate the process: every failure here is a
      // verdict on the communicator instead.
      try {
        if (auto error = communicator->async_error()) {
          communicator->abort("NCCL reported an error during " + entry.op + ": " + *error);
          continue;
        }
        if (entry.done->query()) {
          continue;
        }
      } catch (const std::exception& error) {
        communicator->abort("c10d_func." + entry.op + ": the watchdog could not query the " +
                            "collective's progress: " + error.what());
        continue;
      }
      if (Clock::now() > entry.deadline) {
        communicator->abort("c10d_func." + entry.op +
                            " did not complete within C10D_FUNC_TIMEOUT; the NCCL communicator " +
                            "was aborted (ncclCommAbort)");
        continue;
      }
      unfinished.push_back(std::move(entry));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : unfinished) {
      entries_.push_front(std::move(entry));
    }
  }
}

}  // namespace c10d_func::nccl
