#pragma once
// A Communicator over a c10d group: torch's ProcessGroupGloo for the CPU groups the registry
// creates, whatever backend a user binds with register_group (Gloo, NCCL, third-party), and a
// ProcessGroup reached only through its Python methods (a subclass written in Python: the
// threaded test group, a `Backend.register_backend` plugin), as torch's functional collectives
// reach it. The collectives are written once over GroupCalls; each kind of group implements it.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "transports/communicator.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

// The group methods the collectives use, with c10d's signatures.
class GroupCalls {
 public:
  using Work = c10::intrusive_ptr<c10d::Work>;
  virtual ~GroupCalls() = default;

  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  virtual std::string name() const = 0;

  virtual Work allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) = 0;
  virtual Work allgather_base(at::Tensor& output, at::Tensor& input) = 0;
  virtual Work alltoall_base(at::Tensor& output, at::Tensor& input,
                             std::vector<int64_t>& output_split_sizes,
                             std::vector<int64_t>& input_split_sizes) = 0;
  virtual Work broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) = 0;
  virtual Work reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) = 0;
  virtual Work gather(std::vector<std::vector<at::Tensor>>& outputs,
                      std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) = 0;
  virtual Work scatter(std::vector<at::Tensor>& outputs,
                       std::vector<std::vector<at::Tensor>>& inputs,
                       const c10d::ScatterOptions& opts) = 0;
  // The group's own reduce-scatter; groups without one (has_reduce_scatter false) get it
  // composed from an all-to-all and a local reduction.
  virtual bool has_reduce_scatter() const { return false; }
  virtual Work reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                   const c10d::ReduceScatterOptions& opts);
  // False: reduce goes through all-reduce (only the root's result is kept).
  virtual bool has_reduce() const { return true; }
  // The group's timeout for later collectives (c10d's setTimeout); a group reached through
  // Python methods keeps its own.
  virtual void set_timeout(std::chrono::milliseconds timeout) {}
  // Whether the group's Works end their profiler record only after completing their futures:
  // torch's Gloo ends it in Work::finish, after the future's callbacks ran, so a caller woken
  // by the future may stop a profiler before the record ends, and the profiler then has no
  // event for the collective.
  virtual bool ends_record_after_future() const { return false; }
};

std::shared_ptr<Communicator> make_group_communicator(std::unique_ptr<GroupCalls> calls);

std::shared_ptr<Communicator> make_backend_communicator(c10::intrusive_ptr<c10d::Backend> backend);

}  // namespace c10d_func
