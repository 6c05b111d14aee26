// NcclCommunicator: the library's collectives on a raw NCCL communicator.
//
// Creation: the chunk's first member makes the ncclUniqueId and publishes it under the key's
// store prefix; every member then calls ncclCommInitRankConfig in non-blocking mode and polls it
// against C10D_FUNC_TIMEOUT, so a member that never arrives aborts the others instead of hanging.
// A partition of the whole world is made by ncclCommSplit of the world communicator instead
// (the registry decides; see GroupRegistry::split_world).
//
// Each call: the communicator's stream waits on the caller's current stream (inputs are ready),
// the tensors are recorded on that stream (the caching allocator keeps their memory until the
// collective is done even if Python drops them), the NCCL call and any finishing step (copy
// back, avg division, a local reduction) are enqueued on it, and a CUDA Future is completed at
// once: waiting on it makes the waiter's current stream wait on the communicator's stream; the
// host never blocks. A watchdog thread aborts a communicator (ncclCommAbort) whose collective
// outlives the timeout or reports an asynchronous error; the next use or wait raises, naming
// the op and the group.
//
// NCCL has no bitwise reductions: band/bor/bxor (and bool xor) are an all-gather followed by a
// local reduction on the communicator's stream: correct results, group_size times the traffic.
#include "transports/nccl/nccl_communicator.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "transports/local_reduce.h"
#include "transports/nccl/nccl_calls.h"
#include "transports/nccl/nccl_device_check.h"
#include "transports/nccl/nccl_plan.h"
#include "transports/nccl/nccl_types.h"
#include "transports/nccl/nccl_watchdog.h"
#include "transports/reduction_staging.h"
#include "transports/shared_timeout.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace c10d_func {
namespace {

using nccl::check;
using nccl::check_one_rank_per_device;
using nccl::nccl_dtype;
using nccl::nccl_failed;
using nccl::nccl_op;
using nccl::wait_until_ready;

using Clock = std::chrono::steady_clock;

size_t byte_count(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

class NcclCommunicator final : public Communicator,
                               public nccl::Watched,
                               public std::enable_shared_from_this<NcclCommunicator> {
 public:
  NcclCommunicator(ncclComm_t comm, c10::Device device, std::chrono::milliseconds timeout)
      : comm_(comm),
        device_(device),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index())),
        timeout_(timeout) {
    int rank = 0;
    int count = 0;
    ncclCommUserRank(comm_, &rank);
    ncclCommCount(comm_, &count);
    rank_ = rank;
    size_ = count;
  }

  ~NcclCommunicator() override {
    // Destroy waits for outstanding work; an aborted communicator is already released.
    if (!aborted_) {
      ncclCommDestroy(comm_);
    }
  }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string backend_name() const override { return "nccl"; }
  void set_timeout(std::chrono::milliseconds timeout) override { timeout_.set(timeout); }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    auto staged = stage_reduction(buffer, reduce_op, /*transport_averages_floats=*/true);
    if (is_bitwise(staged.wire_op)) {
      return reduce_by_gathering("all_reduce", buffer, reduce_op);
    }
    return launch("all_reduce", {buffer, staged.wire},
                  [&](cudaStream_t stream, Clock::time_point deadline) {
                    check(ncclAllReduce(staged.wire.data_ptr(), staged.wire.data_ptr(),
                                        staged.wire.numel(), nccl_dtype(staged.wire.scalar_type()),
                                        nccl_op(staged.wire_op), comm_, stream),
                          comm_, deadline, "ncclAllReduce");
                    if (staged.needs_finish()) {
                      staged.finish(buffer, size_);
                    }
                  });
  }

  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    if (input.numel() == 0) {
      return completed();
    }
    return launch("all_gather", {output, input},
                  [&](cudaStream_t stream, Clock::time_point deadline) {
                    check(ncclAllGather(input.data_ptr(), output.data_ptr(), byte_count(input),
                                        ncclUint8, comm_, stream),
                          comm_, deadline, "ncclAllGather");
                  });
  }

  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override {
    if (input.numel() == 0) {
      return completed();
    }
    auto staged_out = stage_reduction(output, reduce_op, /*transport_averages_floats=*/true);
    if (is_bitwise(staged_out.wire_op)) {
      // Each member's chunk from everyone (an all-to-all), then a local reduction.
      at::Tensor received = at::empty_like(input, at::MemoryFormat::Contiguous);
      const std::vector<int64_t> splits(size_, input.size(0) / size_);
      std::vector<int64_t> stacked{size_};
      stacked.insert(stacked.end(), output.sizes().begin(), output.sizes().end());
      return launch("reduce_scatter", {output, input, received},
                    [&](cudaStream_t stream, Clock::time_point deadline) {
                      exchange_rows(received, input, splits, splits, stream, deadline);
                      reduce_stack_into(output, received.view(stacked), reduce_op);
                    });
    }
    at::Tensor wire_in = stage_reduction(input, reduce_op, true).wire;
    return launch("reduce_scatter", {output, input, wire_in, staged_out.wire},
                  [&](cudaStream_t stream, Clock::time_point deadline) {
                    check(ncclReduceScatter(wire_in.data_ptr(), staged_out.wire.data_ptr(),
                                            staged_out.wire.numel(),
                                            nccl_dtype(staged_out.wire.scalar_type()),
                                            nccl_op(staged_out.wire_op), comm_, stream),
                          comm_, deadline, "ncclReduceScatter");
                    if (staged_out.needs_finish()) {
                      staged_out.finish(output, size_);
                    }
                  });
  }

  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    return launch(
        "all_to_all", {output, input}, [&](cudaStream_t stream, Clock::time_point deadline) {
          exchange_rows(output, input, output_split_sizes, input_split_sizes, stream, deadline);
        });
  }

  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    return launch("broadcast", {buffer}, [&](cudaStream_t stream, Clock::time_point deadline) {
      check(ncclBroadcast(buffer.data_ptr(), buffer.data_ptr(), byte_count(buffer), ncclUint8,
                          static_cast<int>(root), comm_, stream),
            comm_, deadline, "ncclBroadcast");
    });
  }

  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    auto staged = stage_reduction(buffer, reduce_op, /*transport_averages_floats=*/true);
    if (is_bitwise(staged.wire_op)) {
      return reduce_by_gathering("reduce", buffer, reduce_op);
    }
    return launch(
        "reduce", {buffer, staged.wire}, [&](cudaStream_t stream, Clock::time_point deadline) {
          check(ncclReduce(staged.wire.data_ptr(), staged.wire.data_ptr(), staged.wire.numel(),
                           nccl_dtype(staged.wire.scalar_type()), nccl_op(staged.wire_op),
                           static_cast<int>(root), comm_, stream),
                comm_, deadline, "ncclReduce");
          if (staged.needs_finish()) {
            staged.finish(buffer, size_);
          }
        });
  }

  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (input.numel() == 0) {
      return completed();
    }
    return launch("gather", {output, input}, [&](cudaStream_t stream, Clock::time_point deadline) {
      issue_plan("gather", nccl::gather_plan(rank_, size_, root, byte_count(input)), output, input,
                 stream, deadline);
    });
  }

  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (output.numel() == 0) {
      return completed();
    }
    return launch("scatter", {output, input}, [&](cudaStream_t stream, Clock::time_point deadline) {
      issue_plan("scatter", nccl::scatter_plan(rank_, size_, root, byte_count(output)), output,
                 input, stream, deadline);
    });
  }

  std::shared_ptr<Communicator> split(int64_t color, int64_t key) override {
    c10::cuda::CUDAGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    // Non-blocking, NCCL's background job writes the child's handle only once the split is done
    // (null until then), and the parent's state need not show that job. The slot lives on the
    // heap and is let go of on failure, so a job finishing after we gave up writes no dead stack.
    auto slot = std::make_unique<ncclComm_t>(nullptr);
    const auto deadline = Clock::now() + timeout_.get();
    // A negative color: this member joins the split call but no part of it.
    const int nccl_color = nccl::split_color(color);
    check(ncclCommSplit(comm_, nccl_color, static_cast<int>(key), slot.get(), &config), comm_,
          deadline, "ncclCommSplit");
    if (color < 0) {
      return nullptr;
    }
    ncclComm_t child = nullptr;
    while ((child = __atomic_load_n(slot.get(), __ATOMIC_ACQUIRE)) == nullptr) {
      std::optional<std::string> error = async_error();
      if (error || Clock::now() > deadline) {
        (void)slot.release();
        TORCH_CHECK(false, "c10d_func: ncclCommSplit (color ", color, ") ",
                    error ? "failed: " + *error
                          : std::string("did not complete within C10D_FUNC_TIMEOUT (a member "
                                        "may be missing)"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    wait_until_ready(child, deadline, "ncclCommSplit");
    return std::make_shared<NcclCommunicator>(child, device_, timeout_.get());
  }

  // The watchdog's verdict: a collective is stuck or NCCL reported an error (on_failed aborts).
  void abort(const std::string& reason) override { mark_failed(reason); }

  // Any first failure, the watchdog's or one found elsewhere (a wrapper's wait, the group's
  // ProcessGroup.abort), ends the communicator now: its members are out of step, a kernel in
  // flight would run until the watchdog's timeout, and destroying a communicator whose peer is
  // gone can hang. Once: mark_failed calls it for the first failure only.
  void on_failed(const std::string& /*reason*/) override {
    aborted_ = true;
    ncclCommAbort(comm_);
  }

  // NCCL's asynchronous error on this communicator, if any.
  std::optional<std::string> async_error() const override {
    if (aborted_) {
      return std::nullopt;
    }
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) {
      return std::string("ncclCommGetAsyncError failed");
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      return std::string(ncclGetErrorString(state));
    }
    return std::nullopt;
  }

 private:
  using Issue = std::function<void(cudaStream_t, Clock::time_point)>;

  Completion launch(const char* op, std::initializer_list<at::Tensor> tensors, const Issue& issue) {
    if (auto failed = failure()) {
      TORCH_CHECK(false, "c10d_func.", op, ": the NCCL communicator failed earlier: ", *failed);
    }
    c10::cuda::CUDAGuard guard(device_);
    const auto current = c10::cuda::getCurrentCUDAStream(device_.index());
    c10::Event inputs_ready(c10::DeviceType::CUDA);
    inputs_ready.record(current);
    inputs_ready.block(stream_);
    for (const auto& tensor : tensors) {
      if (tensor.defined() && tensor.numel() > 0) {
        c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream_);
      }
    }
    c10::cuda::CUDAStreamGuard on_comm_stream(stream_);
    const auto deadline = Clock::now() + timeout_.get();
    issue(stream_.stream(), deadline);
    auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get(),
                                                         std::vector<c10::Device>{device_});
    // A CUDA Future records its completion events only on the devices of the storages it is
    // given (a None value has none, and waiting on it would then order nothing): name the
    // collective's tensors, so an event is recorded on the communicator's stream, the current
    // one here, and wait() makes the waiter's stream wait on it.
    std::vector<c10::ivalue::Future::WeakStorage> storages;
    for (const auto& tensor : tensors) {
      if (tensor.defined() && tensor.has_storage()) {
        storages.emplace_back(tensor.storage().getWeakStorageImpl());
      }
    }
    done->markCompleted(c10::IValue(), std::move(storages));
    // Events recorded while a CUDA graph is being captured cannot be queried: no watchdog then.
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None) {
      auto finished = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
      finished->record(stream_);
      nccl::Watchdog::instance().track(weak_from_this(), finished, Clock::now() + timeout_.get(),
                                       op);
    }
    return done;
  }

  void group(Clock::time_point deadline, const char* what, const std::function<void()>& calls) {
    check(ncclGroupStart(), comm_, deadline, std::string(what) + " ncclGroupStart");
    calls();
    check(ncclGroupEnd(), comm_, deadline, std::string(what) + " ncclGroupEnd");
  }

  // Rows of `input` to every member and rows from every member into `output`, as grouped
  // ncclSend/ncclRecv of bytes (any dtype; split sizes count dim-0 rows).
  void exchange_rows(const at::Tensor& output, const at::Tensor& input,
                     const std::vector<int64_t>& output_split_sizes,
                     const std::vector<int64_t>& input_split_sizes, cudaStream_t stream,
                     Clock::time_point deadline) {
    const auto row_bytes = [](const at::Tensor& t) -> size_t {
      const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
      return rows == 0 ? 0 : byte_count(t) / rows;
    };
    const size_t in_row = row_bytes(input);
    const size_t out_row = row_bytes(output);
    issue_plan("all_to_all",
               nccl::all_to_all_plan(size_, output_split_sizes, input_split_sizes, out_row, in_row),
               output, input, stream, deadline);
  }

  // Issues `plan` (nccl_plan.h) as one group of ncclSend from `input` and ncclRecv into
  // `output`.
  void issue_plan(const char* op, const std::vector<nccl::Transfer>& plan, const at::Tensor& output,
                  const at::Tensor& input, cudaStream_t stream, Clock::time_point deadline) {
    const auto* in = static_cast<const char*>(input.data_ptr());
    auto* out = static_cast<char*>(output.data_ptr());
    group(deadline, op, [&] {
      for (const nccl::Transfer& transfer : plan) {
        const int peer = static_cast<int>(transfer.peer);
        if (transfer.send) {
          check(ncclSend(in + transfer.offset, transfer.bytes, ncclUint8, peer, comm_, stream),
                comm_, deadline, "ncclSend");
        } else {
          check(ncclRecv(out + transfer.offset, transfer.bytes, ncclUint8, peer, comm_, stream),
                comm_, deadline, "ncclRecv");
        }
      }
    });
  }

  // A reduction NCCL lacks: gather every member's contribution, reduce locally into `buffer`.
  Completion reduce_by_gathering(const char* op, const at::Tensor& buffer, ReduceOp reduce_op) {
    std::vector<int64_t> stacked{size_};
    stacked.insert(stacked.end(), buffer.sizes().begin(), buffer.sizes().end());
    at::Tensor gathered = at::empty(stacked, buffer.options());
    return launch(op, {buffer, gathered}, [&](cudaStream_t stream, Clock::time_point deadline) {
      check(ncclAllGather(buffer.data_ptr(), gathered.data_ptr(), byte_count(buffer), ncclUint8,
                          comm_, stream),
            comm_, deadline, "ncclAllGather");
      reduce_stack_into(buffer, gathered, reduce_op);
    });
  }

  ncclComm_t comm_;
  c10::Device device_;
  c10::cuda::CUDAStream stream_;
  SharedTimeout timeout_;
  int64_t rank_ = 0;
  int64_t size_ = 0;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::shared_ptr<Communicator> make_nccl_communicator(const Rendezvous& rendezvous) {
  TORCH_CHECK(rendezvous.device.is_cuda() && rendezvous.device.has_index(),
              "c10d_func: the NCCL transport needs a CUDA device with an index, got ",
              rendezvous.device);
  c10::cuda::CUDAGuard guard(rendezvous.device);
  const auto deadline = Clock::now() + rendezvous.remaining();
  check_one_rank_per_device(rendezvous);
  ncclUniqueId id;
  const std::string key = "nccl_unique_id";
  if (rendezvous.rank == 0) {
    check(ncclGetUniqueId(&id), nullptr, deadline, "ncclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    rendezvous.store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    rendezvous.store->wait({key}, rendezvous.remaining());
    const auto bytes = rendezvous.store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id), "c10d_func: malformed ncclUniqueId in the store");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so a missing member times out instead of blocking forever
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, static_cast<int>(rendezvous.size), id,
                                                      static_cast<int>(rendezvous.rank), &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    nccl_failed("ncclCommInitRankConfig", started, comm);
  }
  wait_until_ready(comm, deadline, "ncclCommInitRankConfig");
  return std::make_shared<NcclCommunicator>(comm, rendezvous.device, rendezvous.timeout);
}

}  // namespace c10d_func
