// See solo_communicator.h. A reduction over one member is its input (avg divides by 1, bitwise
// ops fold one operand), so reductions leave the buffer as it is.
#include "transports/solo/solo_communicator.h"

#include <ATen/ATen.h>

namespace c10d_func {
namespace {

// Copies `input` into `output` (same number of elements, both contiguous).
Completion copied(const at::Tensor& output, const at::Tensor& input) {
  if (!input.is_same(output) && input.numel() > 0) {
    output.view(input.sizes()).copy_(input);
  }
  return completed();
}

class SoloCommunicator final : public Communicator {
 public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  std::string backend_name() const override { return "local"; }
  bool reads_inputs_after_return(int64_t) const override { return false; }

  Completion all_reduce(const at::Tensor&, ReduceOp) override { return completed(); }
  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    return copied(output, input);
  }
  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input, ReduceOp) override {
    return copied(output, input);
  }
  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    // The one member sends itself what it expects from itself, as every transport checks.
    TORCH_CHECK_VALUE(output_split_sizes == input_split_sizes, "all_to_all: this member sends ",
                      "itself ", input_split_sizes, " and expects ", output_split_sizes,
                      ": split sizes that do not pair up");
    return copied(output, input);
  }
  Completion broadcast(const at::Tensor&, int64_t) override { return completed(); }
  Completion reduce(const at::Tensor&, int64_t, ReduceOp) override { return completed(); }
  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t) override {
    return copied(output, input);
  }
  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t) override {
    return copied(output, input);
  }
};

}  // namespace

std::shared_ptr<Communicator> make_solo_communicator() {
  return std::make_shared<SoloCommunicator>();
}

}  // namespace c10d_func
