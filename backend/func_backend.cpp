// The c10d_func torch.distributed backend's collectives and messages; see func_backend.h (the
// group-level methods are in func_backend_group.cpp). Each method checks its arguments
// as torch's backends do (naming the op and the argument), brings the caller's tensors into the
// dense contiguous form a Communicator takes (flat views where possible, a staging buffer copied
// back when done otherwise) and returns a FuncWork at once.
#include "backend/func_backend.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "backend/c10d_call_arguments.h"
#include "backend/func_work.h"
#include "backend/op_deadline.h"
#include "backend/sparse_all_reduce.h"
#include "runtime/group_registry.h"
#include "runtime/group_spec.h"
#include "runtime/world.h"
#include "transports/reduce_op.h"
#include "transports/solo/solo_communicator.h"

#include <numeric>
#include <sstream>

namespace c10d_func {

using namespace backend_detail;

void FuncBackend::check_peer(std::string_view op, int64_t peer) const {
  TORCH_CHECK(peer >= 0 && peer < options_.size, kPrefix, op, ": invalid peer rank: ", peer,
              " (process group '", options_.name, "' has ranks 0..", options_.size - 1, ")");
  TORCH_CHECK(peer != options_.rank, kPrefix, op, ": rank ", peer,
              " is this process; a rank cannot send to or receive from itself");
}

c10::intrusive_ptr<c10d::Work> FuncBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  constexpr std::string_view kOp = "broadcast";
  check_root_rank(kOp, opts.rootRank, options_.size);
  check_root_tensor(kOp, opts.rootTensor, tensors.size());
  const at::Tensor& tensor = single(kOp, tensors, "tensors");
  auto comm = communicator(tensor.device(), kOp);
  at::Tensor buffer = flat(tensor, /*fill=*/true);
  auto done = settle(comm->broadcast(buffer, opts.rootRank), {{tensor, buffer}});
  return work(c10d::OpType::BROADCAST, kOp, comm, done, tensors, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  constexpr std::string_view kOp = "allreduce";
  TORCH_CHECK(!tensors.empty(), kPrefix, kOp, ": requires non-empty tensor list");
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) {
    return allreduce_of_sparse(tensors[0], opts);
  }
  const at::Tensor& tensor = single(kOp, tensors, "tensors");
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduction(kOp, reduce_op, tensor.scalar_type());
  auto comm = communicator(tensor.device(), kOp);
  at::Tensor buffer = flat(tensor, /*fill=*/true);
  premultiply(kOp, opts.reduceOp, buffer);
  auto done = settle(comm->all_reduce(buffer, reduce_op), {{tensor, buffer}});
  return work(c10d::OpType::ALLREDUCE, kOp, comm, done, tensors, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  return allreduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allreduce_of_sparse(
    const at::Tensor& tensor, const c10d::AllreduceOptions& opts) {
  constexpr std::string_view kOp = "allreduce";
  TORCH_CHECK(tensor.layout() == at::kSparse, kPrefix, kOp,
              ": unsupported layout (sparse tensors are reduced in the COO layout; got ",
              tensor.layout(), ")");
  // NCCL's answer, for the CUDA side (torch's own NCCL backend has no sparse all_reduce).
  TORCH_CHECK(tensor.is_cpu(), kPrefix, kOp,
              ": NCCL does not support all_reduce with sparse tensors. Please use dense tensors "
              "instead. (c10d_func reduces sparse tensors on CPU, as Gloo does: move it with "
              ".cpu(), or reduce .to_dense())");
  TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM, kPrefix, kOp,
              ": unsupported reduction operation (allreduce of sparse tensors only works with "
              "ReduceOp.SUM)");
  auto comm = communicator(tensor.device(), kOp);
  auto done = sparse_all_reduce(*comm, tensor, describe(kOp));
  return work(c10d::OpType::ALLREDUCE, kOp, comm, done, {tensor}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  constexpr std::string_view kOp = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), kPrefix, kOp, ": requires non-empty tensor list");
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_like(kOp, tensors[i], tensors[0], "tensors", tensors[i].numel(), i);
  }
  check_reduction(kOp, reduce_op, tensors[0].scalar_type());
  auto comm = communicator(tensors[0].device(), kOp);
  // One collective for all of them: reduced as one flat buffer, then split back.
  at::Tensor buffer = concatenated(*comm, tensors, tensors[0]);
  premultiply(kOp, opts.reduceOp, buffer);
  auto done = scatter_into(comm->all_reduce(buffer, reduce_op), buffer, tensors);
  return work(c10d::OpType::ALLREDUCE_COALESCED, kOp, comm, done, tensors, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  constexpr std::string_view kOp = "reduce";
  check_root_rank(kOp, opts.rootRank, options_.size);
  check_root_tensor(kOp, opts.rootTensor, tensors.size());
  const at::Tensor& tensor = single(kOp, tensors, "tensors");
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduction(kOp, reduce_op, tensor.scalar_type());
  auto comm = communicator(tensor.device(), kOp);
  const bool is_root = opts.rootRank == options_.rank;
  // Only the root's tensor receives the result; the others' stay as they were.
  at::Tensor buffer = is_root ? flat(tensor, /*fill=*/true) : concatenated(*comm, {tensor}, tensor);
  premultiply(kOp, opts.reduceOp, buffer);
  Completion done = comm->reduce(buffer, opts.rootRank, reduce_op);
  if (is_root) {
    done = settle(done, {{tensor, buffer}});
  }
  return work(c10d::OpType::REDUCE, kOp, comm, done, tensors, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "allgather";
  TORCH_CHECK(!inputs.empty(), kPrefix, kOp, ": requires non-empty input tensor list");
  TORCH_CHECK(outputs.size() == inputs.size(), kPrefix, kOp,
              ": requires input/output tensor lists to have the same length (got ", inputs.size(),
              " and ", outputs.size(), ")");
  const at::Tensor& input = single(kOp, inputs, "input_tensors");
  TORCH_CHECK(static_cast<int64_t>(outputs[0].size()) == options_.size, kPrefix, kOp,
              ": invalid output tensor list at index 0 (expected length ", options_.size, ", got ",
              outputs[0].size(), ")");
  for (size_t i = 0; i < outputs[0].size(); ++i) {
    check_like(kOp, outputs[0][i], input, "output_tensors", input.numel(), i);
  }
  auto comm = communicator(input.device(), kOp);
  std::vector<at::Tensor> targets = outputs[0];
  at::Tensor gathered = write_end_to_end(*comm, targets, options_.size * input.numel(), input);
  auto done = scatter_into(comm->all_gather(gathered, flat(input, true)), gathered, targets);
  return work(c10d::OpType::ALLGATHER, kOp, comm, done, outputs[0], opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "all_gather_into_tensor";
  check_dense(kOp, input, "input_tensor");
  check_like(kOp, output, input, "output_tensor", input.numel() * options_.size);
  auto comm = communicator(input.device(), kOp);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->all_gather(buffer, flat(input, true)), {{output, buffer}});
  return work(c10d::OpType::_ALLGATHER_BASE, kOp, comm, done, {output}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), kPrefix, kOp, ": requires non-empty input tensor list");
  TORCH_CHECK(static_cast<int64_t>(output_lists.size()) == options_.size, kPrefix, kOp,
              ": output lists should be equal to world size (expected ", options_.size, ", got ",
              output_lists.size(), ")");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_like(kOp, inputs[i], inputs[0], "input_tensor_list", inputs[i].numel(), i);
  }
  std::vector<at::Tensor> targets;  // rank-major: every rank's copy of every input
  for (const auto& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(), kPrefix, kOp,
                ": invalid output size: (expected length ", inputs.size(), ", got ", list.size(),
                ")");
    for (size_t i = 0; i < list.size(); ++i) {
      check_like(kOp, list[i], inputs[i], "output_tensor_lists", inputs[i].numel(), i);
      targets.push_back(list[i]);
    }
  }
  auto comm = communicator(inputs[0].device(), kOp);
  at::Tensor packed = concatenated(*comm, inputs, inputs[0]);
  at::Tensor gathered = staging_buffer(*comm, options_.size * packed.numel(), packed);
  auto done = scatter_into(comm->all_gather(gathered, packed), gathered, targets);
  return work(c10d::OpType::ALLGATHER_COALESCED, kOp, comm, done, targets, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), kPrefix, kOp,
              ": requires input/output tensor lists to have the same length (non-empty lists; ",
              "got ", inputs.size(), " and ", outputs.size(), ")");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_dense(kOp, inputs[i], "inputs");
    check_like(kOp, outputs[i], inputs[i], "outputs", inputs[i].numel() * options_.size, i);
  }
  auto comm = communicator(inputs[0].device(), kOp);
  std::vector<Completion> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor buffer = flat(outputs[i], /*fill=*/false);
    parts.push_back(
        settle(comm->all_gather(buffer, flat(inputs[i], true)), {{outputs[i], buffer}}));
  }
  return work(c10d::OpType::COALESCED, kOp, comm, when_all(parts), outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  constexpr std::string_view kOp = "gather";
  check_root_rank(kOp, opts.rootRank, options_.size);
  const at::Tensor& input =
      single(kOp, inputs, "input_tensors", "requires a single-element input tensor list");
  const bool is_root = opts.rootRank == options_.rank;
  const std::vector<at::Tensor> outputs_of_root =
      root_list(kOp, outputs, input, "output", is_root, options_.size);
  auto comm = communicator(input.device(), kOp);
  std::vector<at::Tensor> targets = outputs_of_root;
  at::Tensor gathered = is_root
                            ? write_end_to_end(*comm, targets, options_.size * input.numel(), input)
                            : staging_buffer(*comm, 0, input);
  auto done =
      scatter_into(comm->gather(gathered, flat(input, true), opts.rootRank), gathered, targets);
  return work(c10d::OpType::GATHER, kOp, comm, done, outputs_of_root, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  constexpr std::string_view kOp = "scatter";
  check_root_rank(kOp, opts.rootRank, options_.size);
  const at::Tensor& output =
      single(kOp, outputs, "output_tensors", "requires a single-element output tensor list");
  const bool is_root = opts.rootRank == options_.rank;
  const std::vector<at::Tensor> pieces =
      root_list(kOp, inputs, output, "input", is_root, options_.size);
  auto comm = communicator(output.device(), kOp);
  const at::Tensor packed =
      is_root ? read_end_to_end(*comm, pieces, output) : at::empty({0}, output.options());
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->scatter(buffer, packed, opts.rootRank), {{output, buffer}});
  return work(c10d::OpType::SCATTER, kOp, comm, done, outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr std::string_view kOp = "reduce_scatter";
  TORCH_CHECK(outputs.size() == inputs.size(), kPrefix, kOp,
              ": requires input/output tensor lists to have the same length (got ", inputs.size(),
              " and ", outputs.size(), ")");
  const at::Tensor& output = single(kOp, outputs, "output");
  TORCH_CHECK(static_cast<int64_t>(inputs[0].size()) == options_.size, kPrefix, kOp,
              ": invalid input tensor list size, must be world size (", options_.size, ", got ",
              inputs[0].size(), ")");
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    check_like(kOp, inputs[0][i], output, "input_list", output.numel(), i);
  }
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduction(kOp, reduce_op, output.scalar_type());
  auto comm = communicator(output.device(), kOp);
  at::Tensor packed = concatenated(*comm, inputs[0], output);
  premultiply(kOp, opts.reduceOp, packed);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->reduce_scatter(buffer, packed, reduce_op), {{output, buffer}});
  return work(c10d::OpType::REDUCE_SCATTER, kOp, comm, done, outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  constexpr std::string_view kOp = "reduce_scatter_tensor";
  check_dense(kOp, output, "output");
  check_like(kOp, input, output, "input", output.numel() * options_.size);
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduction(kOp, reduce_op, output.scalar_type());
  auto comm = communicator(output.device(), kOp);
  at::Tensor packed = flat(input, /*fill=*/true);
  if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
    packed = concatenated(*comm, {packed}, packed);  // the caller's input stays as it was
    premultiply(kOp, opts.reduceOp, packed);
  }
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->reduce_scatter(buffer, packed, reduce_op), {{output, buffer}});
  return work(c10d::OpType::_REDUCE_SCATTER_BASE, kOp, comm, done, {output}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr std::string_view kOp = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), kPrefix, kOp,
              ": requires input/output tensor lists to have the same length (non-empty lists; ",
              "got ", inputs.size(), " and ", outputs.size(), ")");
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_dense(kOp, outputs[i], "outputs");
    check_like(kOp, inputs[i], outputs[i], "inputs", outputs[i].numel() * options_.size, i);
    check_reduction(kOp, reduce_op, outputs[i].scalar_type());
  }
  auto comm = communicator(outputs[0].device(), kOp);
  std::vector<Completion> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor packed = flat(inputs[i], /*fill=*/true);
    if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
      packed = concatenated(*comm, {packed}, packed);
      premultiply(kOp, opts.reduceOp, packed);
    }
    at::Tensor buffer = flat(outputs[i], /*fill=*/false);
    parts.push_back(
        settle(comm->reduce_scatter(buffer, packed, reduce_op), {{outputs[i], buffer}}));
  }
  return work(c10d::OpType::COALESCED, kOp, comm, when_all(parts), outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_split_sizes,
                                                          std::vector<int64_t>& input_split_sizes,
                                                          const c10d::AllToAllOptions& opts) {
  constexpr std::string_view kOp = "all_to_all_single";
  check_dense(kOp, input, "input");
  check_like(kOp, output, input, "output", output.numel());
  auto out_splits = row_splits(kOp, output_split_sizes, output, "output", options_.size);
  auto in_splits = row_splits(kOp, input_split_sizes, input, "input", options_.size);
  // On flat buffers a split counts elements: rows times the elements of a row (the shape past
  // dim 0, which an empty tensor also carries), each tensor's own, as Gloo counts them: an
  // output of other rows than the input's (a flat output for a [n, d] input, a complex input
  // torch views as [n, 2] beside a real output, an empty output on a member that receives
  // nothing) takes the same elements. Whether each pair's elements match is the transports'
  // check, as for any split sizes.
  const auto row_numel = [](const at::Tensor& tensor) {
    return tensor.dim() < 2 ? int64_t{1} : c10::multiply_integers(tensor.sizes().slice(1));
  };
  for (auto& size : out_splits) size *= row_numel(output);
  for (auto& size : in_splits) size *= row_numel(input);
  auto comm = communicator(input.device(), kOp);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->all_to_all(buffer, flat(input, true), out_splits, in_splits),
                     {{output, buffer}});
  return work(c10d::OpType::ALLTOALL_BASE, kOp, comm, done, {output}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  constexpr std::string_view kOp = "all_to_all";
  // Gloo's phrases, output first.
  TORCH_CHECK(static_cast<int64_t>(outputs.size()) == options_.size, kPrefix, kOp,
              ": output tensor list size ", outputs.size(), " does not match world size ",
              options_.size, " (argument 'output_tensor_list')");
  TORCH_CHECK(static_cast<int64_t>(inputs.size()) == options_.size, kPrefix, kOp,
              ": input tensor list size ", inputs.size(), " does not match world size ",
              options_.size, " (argument 'input_tensor_list')");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_like(kOp, inputs[i], inputs[0], "input_tensor_list", inputs[i].numel(), i);
    check_like(kOp, outputs[i], inputs[0], "output_tensor_list", outputs[i].numel(), i);
  }
  std::vector<int64_t> out_splits, in_splits;
  for (size_t i = 0; i < inputs.size(); ++i) {
    out_splits.push_back(outputs[i].numel());
    in_splits.push_back(inputs[i].numel());
  }
  auto comm = communicator(inputs[0].device(), kOp);
  at::Tensor packed = concatenated(*comm, inputs, inputs[0]);
  at::Tensor received = staging_buffer(*comm, total_numel(outputs), inputs[0]);
  auto done =
      scatter_into(comm->all_to_all(received, packed, out_splits, in_splits), received, outputs);
  return work(c10d::OpType::ALLTOALL, kOp, comm, done, outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::barrier(const c10d::BarrierOptions& opts) {
  constexpr std::string_view kOp = "barrier";
  auto comm = communicator(c10::Device(c10::kCPU), kOp);
  at::Tensor token = at::zeros({1}, at::kInt);
  return work(c10d::OpType::BARRIER, kOp, comm, comm->all_reduce(token, ReduceOp::kSum), {},
              opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  constexpr std::string_view kOp = "send";
  check_open(kOp);
  const at::Tensor& tensor = single(kOp, tensors, "tensor", "takes a single tensor");
  check_peer(kOp, dst_rank);
  TORCH_CHECK(tag >= 0, kPrefix, kOp, ": Tag must be nonnegative (got ", tag, ")");
  return work(c10d::OpType::SEND, kOp, nullptr, point_to_point_.send(tensor, dst_rank, tag),
              tensors, c10d::kUnsetTimeout);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  constexpr std::string_view kOp = "recv";
  check_open(kOp);
  const at::Tensor& tensor = single(kOp, tensors, "tensor", "takes a single tensor");
  check_peer(kOp, src_rank);
  TORCH_CHECK(tag >= 0, kPrefix, kOp, ": Tag must be nonnegative (got ", tag, ")");
  return work(c10d::OpType::RECV, kOp, nullptr, point_to_point_.recv(tensor, src_rank, tag),
              tensors, c10d::kUnsetTimeout, std::make_shared<const std::atomic<int>>(src_rank));
}

c10::intrusive_ptr<c10d::Work> FuncBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  constexpr std::string_view kOp = "recv";
  check_open(kOp);
  const at::Tensor& tensor = single(kOp, tensors, "tensor", "takes a single tensor");
  TORCH_CHECK(tag >= 0, kPrefix, kOp, ": Tag must be nonnegative (got ", tag, ")");
  TORCH_CHECK(options_.size > 1, kPrefix, kOp,
              ": from any source (src=None) in a group of one member, which has no other member "
              "to receive from");
  auto source = std::make_shared<std::atomic<int>>(-1);
  return work(c10d::OpType::RECVANYSOURCE, kOp, nullptr,
              point_to_point_.recv_any(tensor, tag, source), tensors, c10d::kUnsetTimeout, source);
}

}  // namespace c10d_func
