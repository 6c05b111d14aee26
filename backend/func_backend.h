#pragma once
// c10d_func as a torch.distributed backend: a c10d::Backend whose collectives run on the same
// communicators as the functional ops (shm between the processes of one host, Gloo across hosts,
// NCCL for CUDA), so `dist.init_process_group("c10d_func")`, `"cpu:c10d_func,cuda:nccl"` and
// `dist.new_group(..., backend="c10d_func")` reach them. The Python package registers it with
// torch.distributed.Backend.register_backend on import.
//
// One communicator per device, formed among the group's members through the store torch hands
// the backend: the CPU one while the group is being created (every member is there), a CUDA one
// on the group's first collective on that device (as ProcessGroupNCCL does). Each is also bound
// in the registry under the group's tag, so the functional ops called with this group (or its
// tag and ranks) run on the very same communicator.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/group_observer.h"
#include "runtime/point_to_point.h"
#include "transports/communicator.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace c10d_func {

struct FuncBackendOptions {
  c10::intrusive_ptr<c10d::Store> store;  // private to this group (torch prefixes it)
  int64_t rank = -1;
  int64_t size = 0;
  std::chrono::milliseconds timeout{};
  std::string name;              // torch's group name
  std::vector<int64_t> members;  // global ranks, in group-rank order
};

class FuncBackend final : public c10d::Backend {
 public:
  static constexpr const char* kName = "c10d_func";

  // torch's Backend.Options of this backend (`pg._get_backend(device).options`): the group's
  // timeout (set_timeout changes it), name and global ranks, and the transport of each
  // communicator formed so far ("cpu:shm", "cpu:shm+gloo,cuda:nccl").
  struct Options final : c10d::Backend::Options {
    Options() : c10d::Backend::Options(kName) {}
    // Not `override`: torch 2.14 declares clone (split/merge copy a child's options through
    // it, and a subclass that did not override it would be sliced); torch 2.11 has none.
    c10::intrusive_ptr<c10d::Backend::Options> clone() const {  // NOLINT(modernize-use-override)
      return c10::make_intrusive<Options>(*this);
    }
    std::string transport;
  };

  explicit FuncBackend(FuncBackendOptions options);

  // "ptd:<group name>": the tag the functional API gives this group (python/c10d_func/_groups.py).
  const std::string& tag() const { return tag_; }
  const std::vector<int64_t>& members() const { return options_.members; }
  // This group's communicator for `device`, formed on first use by every member.
  std::shared_ptr<Communicator> communicator(c10::Device device, std::string_view op);
  // Takes `communicator` (split from a parent's) as this group's communicator for `device`.
  void adopt(c10::Device device, std::shared_ptr<Communicator> communicator);
  // The communicators formed so far, by device.
  std::vector<std::pair<c10::Device, std::shared_ptr<Communicator>>> communicators();

  const std::string getBackendName() const override { return kName; }

  // Timeouts (torch's semantics): the group's, from init_process_group / new_group, changed by
  // set_timeout for the collectives issued after it; and each call's own Options.timeout, which
  // bounds that call alone (op_deadline.h). Either way a member that does not take part fails
  // the call naming it.
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_relaxed));
  }
  void setTimeout(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;

  // torch's split (ProcessGroup.split_group, dist.split_group, new_group from a bound world):
  // called by every member of this group with the ranks of its own part; a non-member gets
  // nullptr. Device communicators that can split do (NCCL: one ncclCommSplit of every member);
  // the part's CPU communicator forms among its members (shm and Gloo cannot split).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // torch's merge_remote_group: a new group of `size` members meeting in `store`.
  c10::intrusive_ptr<c10d::Backend> merge(const c10::intrusive_ptr<c10d::Store>& store,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts,
                                          const int& rank, const int& size) override;
  // What a member outside the new group does where torch's new_group splits a bound world's
  // communicator (ProcessGroupNCCL's perform_nocolor_split): joins the split as no part.
  void perform_nocolor_split(c10::Device device);
  // init_process_group(device_id=...) forms that device's communicator now, so new groups can
  // split it.
  void eagerConnectSingleDevice(at::Device device) override;
  // torch's destroy_process_group calls shutdown: the group's communicators leave the registry
  // (which would otherwise keep them, their shared memory and their threads, for the rest of the
  // process) and go once their last Work does; a collective issued before finishes. abort
  // (`ProcessGroup.abort()`) also fails them first, so a collective in flight on them raises
  // now instead of at its timeout (on shared memory the host's other members' too). Either way
  // every later call on the group raises, naming why.
  void shutdown() override;
  void abort() override;

  // torch's Backend.allocate_tensor, which FSDP2 calls for its all_gather and reduce_scatter
  // buffers after `set_allocate_memory_from_process_group_for_comm(True)`: a CPU tensor in the
  // group's symmetric host memory (docs/symmetric_memory.md), which those collectives read and
  // write in place instead of copying it into the pool (ordinary memory where the transport has
  // none). torch asks by device index alone; only a CPU device has none (-1).
  bool supportsTensorAlloc(c10::DeviceIndex device_index) override { return device_index < 0; }
  at::Tensor allocateTensor(long size, at::TensorOptions options) override;

  // torch's sequence number of the group (`pg._get_sequence_number_for_group()`): collectives
  // issued so far, the same count on every member. TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every
  // new group's backend in torch's ProcessGroupWrapper, which compares it across the members
  // before each collective. It starts at 0 on every member, so there is nothing to agree on:
  // setting it is a no-op (torch 2.11's default raises; 2.14's warns it is deprecated).
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return issued_.load(std::memory_order_relaxed); }

  // Gloo's monitored_barrier: rank 0 names the members that did not arrive within the timeout
  // (the first, or all of them with wait_all_ranks); monitored_barrier.h.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  // Sparse COO tensors on CUDA reach this (SparseCUDA); on CPU they reach allreduce.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // "all_reduce on process group 'name' (ranks [0, 1])": for errors.
  std::string describe(std::string_view op) const;
  // How torch's tools name this group's communicator on `device`.
  GroupIdentity identity(c10::Device device) const;
  // The Work of a call; `op_timeout` is its Options.timeout (kUnsetTimeout: the group's).
  c10::intrusive_ptr<c10d::Work> work(
      c10d::OpType type, std::string_view op, const std::shared_ptr<Communicator>& communicator,
      Completion done, std::vector<at::Tensor> outputs, std::chrono::milliseconds op_timeout,
      std::shared_ptr<const std::atomic<int>> source_rank = nullptr);
  void check_peer(std::string_view op, int64_t peer) const;
  // Raises, naming `op`, once shutdown or abort has run.
  void check_open(std::string_view op) const;
  // Takes the group out of service: later calls raise with `why`; the communicators leave
  // the registry (failed first with `failure`, when given).
  void close(const char* why, const std::string& failure);
  c10::intrusive_ptr<c10d::Work> allreduce_of_sparse(const at::Tensor& tensor,
                                                     const c10d::AllreduceOptions& opts);
  // split and merge through here: the group `make` forms, unless the previous call asked for the
  // same one (same store, same `key`), which gets what that call got. torch 2.11's
  // ProcessGroup.split_group and merge_remote_group ask the backend of each device in turn
  // (cpu, then cuda: the same c10d_func backend) with one store; forming twice there would meet
  // the first formation's keys. torch 2.14 asks once.
  c10::intrusive_ptr<c10d::Backend> derive(
      const c10::intrusive_ptr<c10d::Store>& store, const std::string& key,
      const std::function<c10::intrusive_ptr<c10d::Backend>()>& make);
  c10::intrusive_ptr<c10d::Backend> split_once(
      const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts, const std::string& name);
  // A private connection to the group's store under `prefix`, for the backend's own
  // exchanges (monitored_barrier, roll calls); made once.
  c10::intrusive_ptr<c10d::Store> own_store(const std::string& prefix);

  FuncBackendOptions options_;
  std::atomic<int64_t> timeout_ms_;
  // Collectives issued so far (the same count on every member: they issue in one order; messages
  // are not counted), and
  // monitored barriers: names for the store keys of a call's roll call and of each barrier.
  std::atomic<uint64_t> issued_{0};
  std::atomic<uint64_t> monitored_barriers_{0};
  c10::intrusive_ptr<c10d::Store> own_connection_;  // under mutex_
  std::string tag_;
  // "process group 'name' (ranks [0, 1])": built once, named by every Work's errors.
  std::shared_ptr<const std::string> group_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::shared_ptr<Communicator>> communicators_;
  // Why the group is out of service ("shut down (destroy_process_group)" or "aborted"), or
  // null while it serves; set once, under mutex_.
  std::atomic<const char*> closed_{nullptr};
  PointToPoint point_to_point_;
  struct Derived {
    c10::intrusive_ptr<c10d::Store> store;  // held: its address names the call
    std::string key;
    std::optional<c10::weak_intrusive_ptr<c10d::Backend>> backend;  // none: in no part
  };
  std::mutex derive_mutex_;
  Derived last_derived_;  // under derive_mutex_
};

// The FuncBackend behind `backend`, or nullptr when it is another kind.
FuncBackend* as_func_backend(const c10::intrusive_ptr<c10d::Backend>& backend);

// c10d_func.split_group's device step, called by every member of `parent`'s group: each device
// communicator the parent has formed that can split (NCCL: one ncclCommSplit) is split, and the
// caller's part becomes `child`'s (`child` is null on a member of no part; `color` is then -1).
void split_device_communicators(FuncBackend& parent, FuncBackend* child, int64_t color,
                                int64_t key);

}  // namespace c10d_func
