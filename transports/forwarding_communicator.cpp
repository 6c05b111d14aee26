// See forwarding_communicator.h.
#include "transports/forwarding_communicator.h"

namespace c10d_func {

Completion ForwardingCommunicator::all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) {
  return around({"all_reduce", buffer, buffer},
                [&] { return inner_->all_reduce(buffer, reduce_op); });
}

Completion ForwardingCommunicator::all_gather(const at::Tensor& output, const at::Tensor& input) {
  return around({"all_gather", input, output}, [&] { return inner_->all_gather(output, input); });
}

Completion ForwardingCommunicator::reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                                                  ReduceOp reduce_op) {
  return around({"reduce_scatter", input, output},
                [&] { return inner_->reduce_scatter(output, input, reduce_op); });
}

Completion ForwardingCommunicator::all_to_all(const at::Tensor& output, const at::Tensor& input,
                                              std::vector<int64_t> output_split_sizes,
                                              std::vector<int64_t> input_split_sizes) {
  return around({"all_to_all", input, output}, [&] {
    return inner_->all_to_all(output, input, std::move(output_split_sizes),
                              std::move(input_split_sizes));
  });
}

Completion ForwardingCommunicator::broadcast(const at::Tensor& buffer, int64_t root) {
  return around({"broadcast", buffer, buffer}, [&] { return inner_->broadcast(buffer, root); });
}

Completion ForwardingCommunicator::reduce(const at::Tensor& buffer, int64_t root,
                                          ReduceOp reduce_op) {
  return around({"reduce", buffer, buffer},
                [&] { return inner_->reduce(buffer, root, reduce_op); });
}

Completion ForwardingCommunicator::gather(const at::Tensor& output, const at::Tensor& input,
                                          int64_t root) {
  const bool root_here = root == rank();
  return around({"gather", input, root_here ? at::TensorList(output) : at::TensorList()},
                [&] { return inner_->gather(output, input, root); });
}

Completion ForwardingCommunicator::scatter(const at::Tensor& output, const at::Tensor& input,
                                           int64_t root) {
  const bool root_here = root == rank();
  return around({"scatter", root_here ? at::TensorList(input) : at::TensorList(), output},
                [&] { return inner_->scatter(output, input, root); });
}

Completion ForwardingCommunicator::all_reduce_into(const at::Tensor& output,
                                                   const at::Tensor& input, ReduceOp reduce_op) {
  return around({"all_reduce", input, output},
                [&] { return inner_->all_reduce_into(output, input, reduce_op); });
}

Completion ForwardingCommunicator::broadcast_into(const at::Tensor& output, const at::Tensor& input,
                                                  int64_t root) {
  return around({"broadcast", input, output},
                [&] { return inner_->broadcast_into(output, input, root); });
}

}  // namespace c10d_func
