#pragma once
// The c10d::Work a FuncBackend hands to torch.distributed: one collective (or several issued
// together) on a c10d_func communicator. Its Future carries the output tensors as its value, as
// torch's own backends' do (DDP's comm hooks read `future.value()[0]`), and completes when the
// collective's Completion does; on CUDA it carries the collective's events, so wait() orders the
// caller's stream after the collective without blocking the host.
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "transports/communicator.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

class FuncWork final : public c10d::Work {
 public:
  // `op` (a literal) and `group` ("process group '1' (ranks [0, 1])", shared by the group's
  // works) name the call in errors, which alone build the text; a failure marks `communicator`
  // failed, since its members are then out of step (nullptr for messages, which run on channels
  // of their own). `source_rank`: a recv's sender, set by the time `done` is (null for others).
  FuncWork(c10d::OpType op_type, std::string_view op, std::shared_ptr<const std::string> group,
           std::shared_ptr<Communicator> communicator, const Completion& done,
           std::vector<at::Tensor> outputs,
           std::shared_ptr<const std::atomic<int>> source_rank = nullptr);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  // Blocks until done (CPU) or until the collective is enqueued (CUDA: then the current stream
  // waits on it). `timeout` bounds the wait; past it the communicator is marked failed and this
  // raises. Without one, the group's own timeout (which the transport enforces) applies.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  [[noreturn]] void raise_failure();
  // "all_reduce on process group '1' (ranks [0, 1])"
  std::string what() const;

  std::string_view op_;
  std::shared_ptr<const std::string> group_;
  std::shared_ptr<Communicator> communicator_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<const std::atomic<int>> source_rank_;
};

}  // namespace c10d_func
