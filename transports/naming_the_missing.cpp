// See naming_the_missing.h.
#include "transports/naming_the_missing.h"

#include <stdexcept>

namespace c10d_func {
namespace {

class NamingTheMissing final : public Communicator {
 public:
  NamingTheMissing(std::shared_ptr<Communicator> inner, std::shared_ptr<FailureRollCall> roll_call)
      : inner_(std::move(inner)), roll_call_(std::move(roll_call)) {}

  int64_t rank() const override { return inner_->rank(); }
  int64_t size() const override { return inner_->size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  void set_timeout(std::chrono::milliseconds timeout) override { inner_->set_timeout(timeout); }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override {
    return explained(inner_->all_reduce(buffer, reduce_op));
  }
  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    return explained(inner_->all_gather(output, input));
  }
  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override {
    return explained(inner_->reduce_scatter(output, input, reduce_op));
  }
  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    return explained(inner_->all_to_all(output, input, std::move(output_split_sizes),
                                        std::move(input_split_sizes)));
  }
  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    return explained(inner_->broadcast(buffer, root));
  }
  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    return explained(inner_->reduce(buffer, root, reduce_op));
  }
  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    return explained(inner_->gather(output, input, root));
  }
  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    return explained(inner_->scatter(output, input, root));
  }
  Completion all_reduce_into(const at::Tensor& output, const at::Tensor& input,
                             ReduceOp reduce_op) override {
    return explained(inner_->all_reduce_into(output, input, reduce_op));
  }
  Completion broadcast_into(const at::Tensor& output, const at::Tensor& input,
                            int64_t root) override {
    return explained(inner_->broadcast_into(output, input, root));
  }

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
  std::shared_ptr<Communicator> split(int64_t color, int64_t key) override {
    return inner_->split(color, key);
  }

 private:
  Completion explained(const Completion& upstream) { return explained_by(upstream, roll_call_); }
  void on_failed(const std::string& reason) override { inner_->mark_failed(reason); }

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<FailureRollCall> roll_call_;
};

}  // namespace

Completion explained_by(const Completion& upstream,
                        const std::shared_ptr<FailureRollCall>& roll_call) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  upstream->addCallback([roll_call, done](c10::ivalue::Future& finished) {
    if (finished.hasError()) {
      const std::string why = roll_call->explain(finished.tryRetrieveErrorMessage());
      done->setError(std::make_exception_ptr(std::runtime_error(why)));
    } else {
      done->markCompleted();
    }
  });
  chain_deferred_wait(upstream, done);
  return done;
}

std::shared_ptr<Communicator> naming_the_missing(std::shared_ptr<Communicator> inner,
                                                 std::shared_ptr<FailureRollCall> roll_call) {
  return std::make_shared<NamingTheMissing>(std::move(inner), std::move(roll_call));
}

}  // namespace c10d_func
