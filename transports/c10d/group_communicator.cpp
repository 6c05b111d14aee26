// GroupCommunicator: the library's collectives on top of a c10d group's methods (GroupCalls):
// a C++ c10d::Backend's here, a Python ProcessGroup's in the Python module.
//
// c10d backends differ in what they reduce: Gloo has no int16/uint16/uint32/uint64 arithmetic,
// and the meaning of integer `avg` is backend-defined. So reductions are staged the same way on
// every transport (transports/reduction_staging.h) and finished once the wire tensor is final.
// Collectives that only move data never look at the dtype: they move rows of bytes, which is how
// fp8, complex and bool travel on any backend.
#include "transports/c10d/group_communicator.h"
#include "transports/local_reduce.h"
#include "transports/reduction_staging.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

namespace c10d_func {
namespace {

c10d::ReduceOp c10d_reduce_op(ReduceOp reduce_op) {
  using Kind = c10d::ReduceOp::RedOpType;
  switch (reduce_op) {
    case ReduceOp::kSum:
      return c10d::ReduceOp(Kind::SUM);
    case ReduceOp::kAvg:
      return c10d::ReduceOp(Kind::AVG);
    case ReduceOp::kProduct:
      return c10d::ReduceOp(Kind::PRODUCT);
    case ReduceOp::kMin:
      return c10d::ReduceOp(Kind::MIN);
    case ReduceOp::kMax:
      return c10d::ReduceOp(Kind::MAX);
    case ReduceOp::kBand:
      return c10d::ReduceOp(Kind::BAND);
    case ReduceOp::kBor:
      return c10d::ReduceOp(Kind::BOR);
    case ReduceOp::kBxor:
      return c10d::ReduceOp(Kind::BXOR);
  }
  TORCH_INTERNAL_ASSERT(false, "unknown ReduceOp");
}

// c10d backends define integer avg differently (Gloo has none on some dtypes): always compose it.
StagedReduction stage(const at::Tensor& buffer, ReduceOp reduce_op) {
  return stage_reduction(buffer, reduce_op, /*transport_averages_floats=*/false);
}

// A contiguous tensor seen as [rows, bytes-per-row] uint8: what data-moving collectives send.
at::Tensor as_byte_rows(const at::Tensor& tensor) {
  TORCH_INTERNAL_ASSERT(tensor.is_contiguous());
  const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  const int64_t row_bytes = rows == 0 ? 0
                                      : static_cast<int64_t>(tensor.numel() / rows) *
                                            static_cast<int64_t>(tensor.element_size());
  // from_blob-free reinterpretation: a uint8 view over the same storage and offset.
  return at::empty({0}, tensor.options().dtype(at::kByte))
      .set_(tensor.storage(), tensor.storage_offset() * static_cast<int64_t>(tensor.element_size()),
            {rows, row_bytes}, {row_bytes, 1});
}

// The Work's future. A Work with none (Gloo's reduce-scatter) is waited when the output is
// waited, as torch waits it: issuing never blocks.
Completion future_of(const c10::intrusive_ptr<c10d::Work>& work) {
  try {
    return work->getFuture();
  } catch (const std::exception&) {
    return completed_when_waited([work] { work->wait(); });
  }
}

class GroupCommunicator final : public Communicator {
 public:
  explicit GroupCommunicator(std::unique_ptr<GroupCalls> calls) : backend_(std::move(calls)) {}

  int64_t rank() const override { return backend_->rank(); }
  int64_t size() const override { return backend_->size(); }
  std::string backend_name() const override { return backend_->name(); }
  void set_timeout(std::chrono::milliseconds timeout) override { backend_->set_timeout(timeout); }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    auto staged = stage(buffer, reduce_op);
    std::vector<at::Tensor> tensors{staged.wire};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d_reduce_op(staged.wire_op);
    auto work = backend_->allreduce(tensors, options);
    return finish_after(work, buffer, staged);
  }

  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    if (input.numel() == 0) {
      return completed();
    }
    auto out_bytes = as_byte_rows(output).view({-1});
    auto in_bytes = as_byte_rows(input).view({-1});
    return completion_of(backend_->allgather_base(out_bytes, in_bytes));
  }

  // Composed as an all-to-all of the input's chunks followed by a local reduction of what
  // arrived: the same bytes on the wire as a ring reduce-scatter, a Completion on every backend
  // (Gloo's own reduce-scatter Work has no future to chain on), and any dtype.
  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override {
    if (input.numel() == 0) {
      return completed();
    }
    if (backend_->has_reduce_scatter()) {
      auto staged_in = stage(input, reduce_op);
      auto staged_out = stage(output, reduce_op);
      c10d::ReduceScatterOptions options;
      options.reduceOp = c10d_reduce_op(staged_out.wire_op);
      at::Tensor wire_out = staged_out.wire;
      at::Tensor wire_in = staged_in.wire;
      return finish_after(backend_->reduce_scatter_base(wire_out, wire_in, options), output,
                          staged_out);
    }
    at::Tensor received = new_output(input.sizes(), input.options());
    auto received_rows = as_byte_rows(received);
    auto input_rows = as_byte_rows(input);
    std::vector<int64_t> even;  // empty split lists: equal chunks
    auto work = backend_->alltoall_base(received_rows, input_rows, even, even);
    std::vector<int64_t> stacked_shape{size()};
    stacked_shape.insert(stacked_shape.end(), output.sizes().begin(), output.sizes().end());
    return then_run(completion_of(work), output, {received},
                    [output, received, stacked_shape, reduce_op] {
                      reduce_stack_into(output, received.view(stacked_shape), reduce_op);
                    });
  }

  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    auto out_bytes = as_byte_rows(output);
    auto in_bytes = as_byte_rows(input);
    auto work = backend_->alltoall_base(out_bytes, in_bytes, output_split_sizes, input_split_sizes);
    return completion_of(work);
  }

  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    std::vector<at::Tensor> tensors{as_byte_rows(buffer).view({-1})};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return completion_of(backend_->broadcast(tensors, options));
  }

  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    if (!backend_->has_reduce()) {
      return all_reduce(buffer, reduce_op);  // only the root's buffer is defined afterwards
    }
    auto staged = stage(buffer, reduce_op);
    std::vector<at::Tensor> tensors{staged.wire};
    c10d::ReduceOptions options;
    options.reduceOp = c10d_reduce_op(staged.wire_op);
    options.rootRank = root;
    auto work = backend_->reduce(tensors, options);
    return finish_after(work, buffer, staged);
  }

  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (input.numel() == 0) {
      return completed();
    }
    std::vector<at::Tensor> inputs{as_byte_rows(input).view({-1})};
    std::vector<std::vector<at::Tensor>> outputs;
    if (rank() == root) {
      outputs.emplace_back(member_slices(output));
    }
    c10d::GatherOptions options;
    options.rootRank = root;
    return completion_of(backend_->gather(outputs, inputs, options));
  }

  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    if (output.numel() == 0) {
      return completed();
    }
    std::vector<at::Tensor> outputs{as_byte_rows(output).view({-1})};
    std::vector<std::vector<at::Tensor>> inputs;
    if (rank() == root) {
      inputs.emplace_back(member_slices(input));
    }
    c10d::ScatterOptions options;
    options.rootRank = root;
    return completion_of(backend_->scatter(outputs, inputs, options));
  }

 private:
  // `stacked` cut on dim 0 into one flat byte slice per member.
  std::vector<at::Tensor> member_slices(const at::Tensor& stacked) const {
    auto rows = as_byte_rows(stacked);
    std::vector<at::Tensor> slices;
    for (const auto& chunk : rows.chunk(size(), 0)) {
      slices.push_back(chunk.reshape({-1}));
    }
    return slices;
  }

  // The Work's Completion. While a profiler may record, waiting it on a group whose Works end
  // their record after their future (ends_record_after_future) also waits the Work itself, as
  // torch's wait of such a Work does: the record has ended when the wait returns, and the
  // profiler shows the collective under the group's name ("gloo:all_reduce") every time.
  Completion completion_of(const c10::intrusive_ptr<c10d::Work>& work) const {
    auto completion = future_of(work);
    if (backend_->ends_record_after_future() && at::hasCallbacks()) {
      help_when_waited(completion, [work] {
        try {
          work->wait();
        } catch (...) {
          // The future carries the error; the waiter sees it there.
        }
      });
    }
    return completion;
  }

  Completion finish_after(const c10::intrusive_ptr<c10d::Work>& work, const at::Tensor& buffer,
                          const StagedReduction& staged) const {
    auto upstream = completion_of(work);
    if (!staged.needs_finish()) {
      return upstream;
    }
    return then_run(upstream, buffer, {staged.wire},
                    [buffer, staged, group_size = size()] { staged.finish(buffer, group_size); });
  }

  std::unique_ptr<GroupCalls> backend_;
};

// A C++ backend's own methods.
class BackendCalls final : public GroupCalls {
 public:
  explicit BackendCalls(c10::intrusive_ptr<c10d::Backend> backend)
      : backend_(std::move(backend)), gloo_(backend_->getBackendName() == "gloo") {}

  int64_t rank() const override { return backend_->getRank(); }
  int64_t size() const override { return backend_->getSize(); }
  std::string name() const override { return backend_->getBackendName(); }
  void set_timeout(std::chrono::milliseconds timeout) override { backend_->setTimeout(timeout); }
  bool ends_record_after_future() const override { return gloo_; }

  Work allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return backend_->allreduce(tensors, opts);
  }
  Work allgather_base(at::Tensor& output, at::Tensor& input) override {
    return backend_->_allgather_base(output, input);
  }
  Work alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                     std::vector<int64_t>& input_splits) override {
    return backend_->alltoall_base(output, input, output_splits, input_splits);
  }
  Work broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    return backend_->broadcast(tensors, opts);
  }
  Work reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return backend_->reduce(tensors, opts);
  }
  Work gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
              const c10d::GatherOptions& opts) override {
    return backend_->gather(outputs, inputs, opts);
  }
  Work scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
               const c10d::ScatterOptions& opts) override {
    return backend_->scatter(outputs, inputs, opts);
  }

 private:
  c10::intrusive_ptr<c10d::Backend> backend_;
  bool gloo_;
};

}  // namespace

GroupCalls::Work GroupCalls::reduce_scatter_base(at::Tensor&, at::Tensor&,
                                                 const c10d::ReduceScatterOptions&) {
  TORCH_INTERNAL_ASSERT(false, "reduce_scatter_base called on a group without one");
}

std::shared_ptr<Communicator> make_group_communicator(std::unique_ptr<GroupCalls> calls) {
  TORCH_INTERNAL_ASSERT(calls, "make_group_communicator needs a group");
  return std::make_shared<GroupCommunicator>(std::move(calls));
}

std::shared_ptr<Communicator> make_backend_communicator(c10::intrusive_ptr<c10d::Backend> backend) {
  TORCH_INTERNAL_ASSERT(backend, "make_backend_communicator needs a backend");
  return make_group_communicator(std::make_unique<BackendCalls>(std::move(backend)));
}

}  // namespace c10d_func
