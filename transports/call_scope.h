#pragma once
// What the thread issuing collectives tells the transports for the length of a call: the name
// torch.profiler records a collective's work under, whether the caller reuses its inputs as
// soon as a call returns, and what else the members must agree on (StepDetail).
#include <cstdint>
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

// Whether the collectives issued in this scope come from a functional op's kernel (set there,
// runtime/collective_call.h; classic torch.distributed calls leave it unset). Two promises follow
// that classic calls do not make:
// - The caller may write its input tensors as soon as each call returns (inductor reuses a
//   buffer as soon as an op returns); classic calls leave their inputs untouched until the wait.
//   A transport that reads an input after returning protects it only when this is set, and only
//   when it did not run the collective inside the call (Communicator::reads_inputs_after_return
//   false: the transport decides per call).
// - Results are waited only through wait_tensor: their Completions are waited with
//   wait_completion, or handed out as Futures only through expose_completion, so a transport may
//   leave what remains of one to its waiter (TaskQueue's quiet rests). Classic calls' Works'
//   Futures are waited and chained directly, and bounded by the group's timeout whether or not
//   anyone waits them.
class FunctionalOpCall {
 public:
  FunctionalOpCall();
  ~FunctionalOpCall();
  FunctionalOpCall(const FunctionalOpCall&) = delete;
  FunctionalOpCall& operator=(const FunctionalOpCall&) = delete;
  static bool active();

 private:
  bool previous_;
};

// What the members of a collective compare besides what its steps compare by themselves: the
// root of a reduce, gather or scatter that a composite transport runs as an all_reduce,
// all_gather or broadcast (transports/hierarchy). Set on the thread that runs the steps (0: none);
// the shm transport folds it into the collective each member announces (compared at the first
// barrier) and a rail's link into each message's header, so members that name different roots
// fail, naming each other, instead of computing a wrong result.
class StepDetail {
 public:
  explicit StepDetail(uint64_t detail);
  ~StepDetail();
  StepDetail(const StepDetail&) = delete;
  StepDetail& operator=(const StepDetail&) = delete;
  static uint64_t current();
  // `work` run under the detail current where this is called (for steps run on another thread).
  static std::function<void()> carried(std::function<void()> work);
  // The detail of a rooted collective `op` (a short name) run as another, from root `root`.
  static uint64_t of_root(const char* op, int64_t root);

 private:
  uint64_t previous_;
};

}  // namespace c10d_func
