// The per-thread scope of a call; see call_scope.h.
#include "transports/call_scope.h"

#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>

namespace c10d_func {

namespace {
thread_local const std::string* profiled_name = nullptr;
}  // namespace

ProfiledName::ProfiledName(const std::string* name) : previous_(profiled_name) {
  profiled_name = name;
}

ProfiledName::~ProfiledName() {
  profiled_name = previous_;
}

std::function<void()> profiled(std::function<void()> work) {
  if (profiled_name == nullptr) {
    return work;
  }
  // Made here, on the thread that issues: the profiler's callbacks may be this thread's own.
  auto event = std::make_shared<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (!event->isActive()) {
    return work;
  }
  // The profiler's state travels with the work to the thread that runs it, as Gloo's does.
  return at::wrapPropagateTLSState(
      [name = *profiled_name, event = std::move(event), work = std::move(work)] {
        event->_setAsync();
        event->before(std::string_view(name));
        work();
        event->end();
      });
}

namespace {
thread_local bool functional_op_call = false;
}  // namespace

FunctionalOpCall::FunctionalOpCall() : previous_(functional_op_call) {
  functional_op_call = true;
}

FunctionalOpCall::~FunctionalOpCall() {
  functional_op_call = previous_;
}

bool FunctionalOpCall::active() {
  return functional_op_call;
}

namespace {
thread_local uint64_t step_detail = 0;
}  // namespace

StepDetail::StepDetail(uint64_t detail) : previous_(step_detail) {
  step_detail = detail;
}

StepDetail::~StepDetail() {
  step_detail = previous_;
}

uint64_t StepDetail::current() {
  return step_detail;
}

std::function<void()> StepDetail::carried(std::function<void()> work) {
  if (step_detail == 0) {
    return work;
  }
  return [detail = step_detail, work = std::move(work)] {
    StepDetail scope(detail);
    work();
  };
}

uint64_t StepDetail::of_root(const char* op, int64_t root) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a of the op's name, then the root
  for (const char* c = op; *c != '\0'; ++c) {
    hash = (hash ^ static_cast<unsigned char>(*c)) * 1099511628211ULL;
  }
  return (hash ^ static_cast<uint64_t>(root + 1)) * 1099511628211ULL;
}

}  // namespace c10d_func
