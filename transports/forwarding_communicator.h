#pragma once
// ForwardingCommunicator: a communicator that passes every call to another one and sees each
// collective go by (around()). The layers that add to any transport without knowing it derive
// from it: naming the missing members in a failure (missing_member_reports.h), and showing every
// collective to torch's tools (runtime/observed_communicator.h).
#include <c10/util/FunctionRef.h>

#include "transports/communicator.h"

#include <memory>
#include <string_view>

namespace c10d_func {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(std::shared_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int64_t rank() const override { return inner_->rank(); }
  int64_t size() const override { return inner_->size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  void set_timeout(std::chrono::milliseconds timeout) override { inner_->set_timeout(timeout); }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override;
  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override;
  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override;
  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override;
  Completion broadcast(const at::Tensor& buffer, int64_t root) override;
  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override;
  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override;
  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override;
  Completion all_reduce_into(const at::Tensor& output, const at::Tensor& input,
                             ReduceOp reduce_op) override;
  Completion broadcast_into(const at::Tensor& output, const at::Tensor& input,
                            int64_t root) override;

  bool reads_inputs_after_return(int64_t bytes) const override {
    return inner_->reads_inputs_after_return(bytes);
  }
  at::Tensor snapshot(const at::Tensor& input) override { return inner_->snapshot(input); }
  at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    return inner_->new_output(sizes, options);
  }
  at::Tensor new_symmetric(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    return inner_->new_symmetric(sizes, options);
  }
  std::vector<std::pair<std::string, int64_t>> memory_stats() const override {
    return inner_->memory_stats();
  }
  std::optional<Activity> activity() const override { return inner_->activity(); }
  std::optional<uint64_t> issued_by(int64_t member) const override {
    return inner_->issued_by(member);
  }
  std::shared_ptr<Communicator> split(int64_t color, int64_t key) override {
    return inner_->split(color, key);
  }

 protected:
  // One collective, in torch's spelling ("all_reduce", "all_gather", ...), with what it reads
  // and writes (gather's output and scatter's input only where the member uses them).
  struct Call {
    std::string_view op;
    at::TensorList inputs;
    at::TensorList outputs;
  };
  // Issues `call` (issue() passes it on) and returns its Completion.
  virtual Completion around(const Call& call, c10::function_ref<Completion()> issue) {
    return issue();
  }
  Communicator& inner() const { return *inner_; }
  // The first failure, told to whatever is forwarded to.
  void on_failed(const std::string& reason) override { inner_->mark_failed(reason); }
  // And the inner communicator's own failures (a watchdog's verdict) are the wrapper's.
  const Communicator* failure_source() const override { return inner_.get(); }

 private:
  std::shared_ptr<Communicator> inner_;
};

}  // namespace c10d_func
