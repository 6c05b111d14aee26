// The Work of the c10d_func backend; see func_work.h.
#include "backend/func_work.h"

#include "runtime/deferred_release.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace c10d_func {

FuncWork::FuncWork(c10d::OpType op_type, std::string_view op,
                   std::shared_ptr<const std::string> group,
                   std::shared_ptr<Communicator> communicator, const Completion& done,
                   std::vector<at::Tensor> outputs,
                   std::shared_ptr<const std::atomic<int>> source_rank)
    : Work(-1, op_type),
      op_(op),
      group_(std::move(group)),
      communicator_(std::move(communicator)),
      outputs_(std::move(outputs)),
      source_rank_(std::move(source_rank)) {
  // As done->then(...), except that this thread is never the last to let go of the outputs:
  // the thread completing `done` parks its references (runtime/deferred_release.h), since the
  // caller, woken, may be shutting Python down by then.
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(), done->devices());
  done->addCallback([result = future_, outputs = outputs_](c10::ivalue::Future& parent) mutable {
    auto future = std::move(result);
    if (parent.hasError()) {
      future->setError(parent.exception_ptr());
    } else {
      try {
        // As then() does: on a device, the outputs' storages are recorded from the value.
        future->markCompleted(c10::IValue(std::move(outputs)));
      } catch (const std::exception&) {
        future->setError(std::current_exception());
      }
    }
    park_release(c10::IValue(std::move(future)));
    if (!outputs.empty()) {  // not handed to the future (it failed)
      park_release(c10::IValue(std::move(outputs)));
    }
  });
  release_parked();
  chain_deferred_wait(done, future_);
  if (!communicator_) {
    return;
  }
  // A failed collective leaves the members out of step whether or not anyone waits on it.
  future_->addCallback([weak = std::weak_ptr<Communicator>(communicator_), op = op_,
                        group = group_](c10::ivalue::Future& future) {
    if (future.hasError()) {
      if (auto communicator = weak.lock()) {
        communicator->mark_failed("c10d_func backend: " + std::string(op) + " on " + *group +
                                  " failed: " + future.tryRetrieveErrorMessage());
      }
    }
  });
}

std::string FuncWork::what() const {
  return std::string(op_) + " on " + *group_;
}

bool FuncWork::isCompleted() {
  return future_->completed();
}

bool FuncWork::isSuccess() const {
  return future_->completed() && !future_->hasError();
}

std::exception_ptr FuncWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

int FuncWork::sourceRank() const {
  TORCH_CHECK(source_rank_, "c10d_func backend: sourceRank() is defined for recv only (", what(),
              ")");
  // A recv from any source learns its sender once a message is taken: -1 until then, as Gloo's.
  return source_rank_->load();
}

std::vector<at::Tensor> FuncWork::result() {
  return outputs_;
}

void FuncWork::synchronize() {
  // The current stream waits on the collective's events (a no-op on CPU).
  wait_completion(future_);
}

bool FuncWork::wait(std::chrono::milliseconds timeout) {
  run_deferred_wait(future_);
  if (timeout != kNoTimeout && !future_->completed()) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto nap = std::chrono::microseconds(20);
    while (!future_->completed()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        const std::string reason = "c10d_func backend: " + what() + " did not complete within " +
                                   std::to_string(timeout.count()) +
                                   " ms (a member may have skipped it or died)";
        if (communicator_) {
          communicator_->mark_failed(reason);
        }
        TORCH_CHECK(false, reason);
      }
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(2000));
    }
  }
  wait_completion(future_);
  release_parked();  // on the caller's thread, which may take the GIL
  if (future_->hasError()) {
    raise_failure();
  }
  return true;
}

void FuncWork::raise_failure() {
  const std::string reason = future_->tryRetrieveErrorMessage();
  // A transport may have named the op and the group itself (shm does).
  TORCH_CHECK(false,
              reason.rfind("c10d_func", 0) == 0 ? "" : "c10d_func backend: " + what() + " failed: ",
              reason);
}

c10::intrusive_ptr<c10::ivalue::Future> FuncWork::getFuture() {
  expose_completion(future_);  // waited directly (DDP's hooks): no collective left to a waiter
  return future_;
}

}  // namespace c10d_func
