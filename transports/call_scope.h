#pragma once
// What the thread issuing collectives tells the transports for the length of a call: the name
// torch.profiler records a collective's work under, and whether the caller reuses its inputs as
// soon as a call returns.
#include <functional>
#include <string>

namespace c10d_func {

// torch.profiler sees a collective where it runs. While a profiler records, the layer that
// observes collectives (runtime/group_observer.h) names the one being issued on this thread
// ("shm:all_reduce") for as long as its issue lasts; a transport wraps the work it runs, in the
// call or on a thread of its own, with profiled(), which records it under that name there. With
// no name (no profiler, or a part of a composite transport) the work is returned as it is.
class ProfiledName {
 public:
  explicit ProfiledName(const std::string* name);
  ~ProfiledName();
  ProfiledName(const ProfiledName&) = delete;
  ProfiledName& operator=(const ProfiledName&) = delete;

 private:
  const std::string* previous_;
};
std::function<void()> profiled(std::function<void()> work);

// Whether the caller of the collectives issued in this scope may write their input tensors as
// soon as each call returns: set by the functional ops' kernels (runtime/collective_call.h), whose
// callers own their inputs again at once (inductor reuses a buffer as soon as an op returns).
// Classic torch.distributed calls leave it unset: their inputs stay untouched until the wait.
// A transport that reads an input after returning protects it only when this is set, and only
// when it did not run the collective inside the call (Communicator::reads_inputs_after_return
// false: the transport decides per call).
class InputsReusedOnReturn {
 public:
  InputsReusedOnReturn();
  ~InputsReusedOnReturn();
  InputsReusedOnReturn(const InputsReusedOnReturn&) = delete;
  InputsReusedOnReturn& operator=(const InputsReusedOnReturn&) = delete;
  static bool active();

 private:
  bool previous_;
};

}  // namespace c10d_func
