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
thread_local bool inputs_reused_on_return = false;
}  // namespace

InputsReusedOnReturn::InputsReusedOnReturn() : previous_(inputs_reused_on_return) {
  inputs_reused_on_return = true;
}

InputsReusedOnReturn::~InputsReusedOnReturn() {
  inputs_reused_on_return = previous_;
}

bool InputsReusedOnReturn::active() {
  return inputs_reused_on_return;
}

}  // namespace c10d_func
