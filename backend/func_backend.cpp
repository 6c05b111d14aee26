// The c10d_func torch.distributed backend; see func_backend.h. Each method checks its arguments
// as torch's backends do (naming the op and the argument), brings the caller's tensors into the
// dense contiguous form a Communicator takes (flat views where possible, a staging buffer copied
// back when done otherwise) and returns a FuncWork at once.
#include "backend/func_backend.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "backend/call_helpers.h"
#include "backend/func_work.h"
#include "ops/group_registry.h"
#include "ops/group_spec.h"
#include "ops/world.h"
#include "transports/reduce_op.h"
#include "transports/solo/solo_communicator.h"

#include <numeric>
#include <sstream>

namespace c10d_func {

using namespace backend_detail;

FuncBackend::FuncBackend(FuncBackendOptions options)
    : Backend(static_cast<int>(options.rank), static_cast<int>(options.size)),
      options_(std::move(options)),
      tag_("ptd:" + options_.name),
      group_(std::make_shared<const std::string>("process group '" + options_.name + "' (ranks " +
                                                 format_ranks(options_.members) + ")")),
      point_to_point_(options_.store, options_.rank, options_.members, options_.timeout, *group_) {
  TORCH_CHECK(static_cast<int64_t>(options_.members.size()) == options_.size, kPrefix, "group '",
              options_.name, "' lists ", options_.members.size(), " global ranks for a group of ",
              options_.size);
  // Every member is creating the group right now, so its CPU communicator forms here: a missing
  // member fails the group's creation (naming it) instead of its first collective.
  (void)communicator(c10::Device(c10::kCPU), "init_process_group");
}

std::string FuncBackend::describe(std::string_view op) const {
  return std::string(op) + " on " + *group_;
}

std::shared_ptr<Communicator> FuncBackend::communicator(c10::Device device, std::string_view op) {
  const std::pair<int, int> key{static_cast<int>(device.type()),
                                device.is_cpu() ? -1 : static_cast<int>(device.index())};
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = communicators_[key];
  if (!slot) {
    std::ostringstream prefix;
    prefix << "c10d_func/" << device << "/";
    Rendezvous rendezvous;
    rendezvous.store =
        c10::make_intrusive<c10d::PrefixStore>(prefix.str(), private_connection(options_.store));
    rendezvous.rank = options_.rank;
    rendezvous.size = options_.size;
    rendezvous.members = options_.members;
    rendezvous.group = "process group '" + options_.name + "'";
    rendezvous.timeout = options_.timeout;
    rendezvous.device = device;
    auto& registry = GroupRegistry::instance();
    const Transport transport = registry.transport_for(op, device.type(), tag_);
    slot = options_.size == 1 && !transport.forced ? make_solo_communicator()
                                                   : form_communicator(op, transport, rendezvous);
    // The functional ops called with this group find this communicator under the group's tag.
    registry.register_communicator(device.type(), tag_, options_.members, slot);
  }
  TORCH_CHECK(!slot->failed(), kPrefix, describe(op), ": the group is unusable after an earlier ",
              "failure (", slot->failure().value_or(""), "); its members are out of step. Create ",
              "a new group");
  return slot;
}

void FuncBackend::adopt(c10::Device device, std::shared_ptr<Communicator> communicator) {
  std::lock_guard<std::mutex> lock(mutex_);
  communicators_[{static_cast<int>(device.type()), device.is_cpu() ? -1 : device.index()}] =
      communicator;
  GroupRegistry::instance().register_communicator(device.type(), tag_, options_.members,
                                                  std::move(communicator));
}

std::vector<std::pair<c10::Device, std::shared_ptr<Communicator>>> FuncBackend::communicators() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<c10::Device, std::shared_ptr<Communicator>>> formed;
  for (const auto& [key, communicator] : communicators_) {
    if (communicator) {
      formed.emplace_back(c10::Device(static_cast<c10::DeviceType>(key.first),
                                      static_cast<c10::DeviceIndex>(key.second)),
                          communicator);
    }
  }
  return formed;
}

c10::intrusive_ptr<c10d::Work> FuncBackend::work(c10d::OpType type, std::string_view op,
                                                 const std::shared_ptr<Communicator>& communicator,
                                                 const Completion& done,
                                                 std::vector<at::Tensor> outputs,
                                                 int source_rank) const {
  return c10::make_intrusive<FuncWork>(type, op, group_, communicator, done, std::move(outputs),
                                       source_rank);
}

void FuncBackend::check_root(std::string_view op, int64_t root) const {
  TORCH_CHECK(root >= 0 && root < options_.size, kPrefix, op, ": invalid root rank ", root,
              " for process group '", options_.name, "' of ", options_.size, " ranks");
}

void FuncBackend::check_peer(std::string_view op, int64_t peer) const {
  TORCH_CHECK(peer >= 0 && peer < options_.size, kPrefix, op, ": invalid peer rank ", peer,
              " for process group '", options_.name, "' of ", options_.size, " ranks");
  TORCH_CHECK(peer != options_.rank, kPrefix, op, ": rank ", peer,
              " is this process; a rank cannot send to or receive from itself");
}

c10::intrusive_ptr<c10d::Work> FuncBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  constexpr std::string_view kOp = "broadcast";
  const at::Tensor& tensor = single(kOp, tensors, "tensors");
  check_root(kOp, opts.rootRank);
  auto comm = communicator(tensor.device(), kOp);
  at::Tensor buffer = flat(tensor, /*fill=*/true);
  auto done = settle(comm->broadcast(buffer, opts.rootRank), {{tensor, buffer}});
  return work(c10d::OpType::BROADCAST, kOp, comm, done, tensors);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  constexpr std::string_view kOp = "allreduce";
  const at::Tensor& tensor = single(kOp, tensors, "tensors");
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduce_dtype(kOp, reduce_op, tensor.scalar_type());
  auto comm = communicator(tensor.device(), kOp);
  at::Tensor buffer = flat(tensor, /*fill=*/true);
  premultiply(kOp, opts.reduceOp, buffer);
  auto done = settle(comm->all_reduce(buffer, reduce_op), {{tensor, buffer}});
  return work(c10d::OpType::ALLREDUCE, kOp, comm, done, tensors);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  constexpr std::string_view kOp = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), kPrefix, kOp, ": argument 'tensors' is empty");
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  for (const auto& tensor : tensors) {
    check_like(kOp, tensor, tensors[0], "tensors", tensor.numel());
  }
  check_reduce_dtype(kOp, reduce_op, tensors[0].scalar_type());
  auto comm = communicator(tensors[0].device(), kOp);
  // One collective for all of them: reduced as one flat buffer, then split back.
  at::Tensor buffer = concatenated(tensors, tensors[0]);
  premultiply(kOp, opts.reduceOp, buffer);
  auto done = scatter_into(comm->all_reduce(buffer, reduce_op), buffer, tensors);
  return work(c10d::OpType::ALLREDUCE_COALESCED, kOp, comm, done, tensors);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  constexpr std::string_view kOp = "reduce";
  const at::Tensor& tensor = single(kOp, tensors, "tensors");
  check_root(kOp, opts.rootRank);
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduce_dtype(kOp, reduce_op, tensor.scalar_type());
  auto comm = communicator(tensor.device(), kOp);
  const bool is_root = opts.rootRank == options_.rank;
  // Only the root's tensor receives the result; the others' stay as they were.
  at::Tensor buffer = is_root ? flat(tensor, /*fill=*/true) : tensor.reshape({-1}).clone();
  premultiply(kOp, opts.reduceOp, buffer);
  Completion done = comm->reduce(buffer, opts.rootRank, reduce_op);
  if (is_root) {
    done = settle(done, {{tensor, buffer}});
  }
  return work(c10d::OpType::REDUCE, kOp, comm, done, tensors);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "allgather";
  const at::Tensor& input = single(kOp, inputs, "input_tensors");
  TORCH_CHECK(outputs.size() == 1, kPrefix, kOp,
              ": argument 'output_tensors' must hold one list, got ", outputs.size());
  TORCH_CHECK(static_cast<int64_t>(outputs[0].size()) == options_.size, kPrefix, kOp,
              ": argument 'output_tensors' must hold one tensor per rank (", options_.size,
              "), got ", outputs[0].size());
  for (const auto& output : outputs[0]) {
    check_like(kOp, output, input, "output_tensors", input.numel());
  }
  auto comm = communicator(input.device(), kOp);
  at::Tensor gathered = at::empty({options_.size * input.numel()}, input.options());
  auto done = scatter_into(comm->all_gather(gathered, flat(input, true)), gathered, outputs[0]);
  return work(c10d::OpType::ALLGATHER, kOp, comm, done, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "all_gather_into_tensor";
  check_dense(kOp, input, "input_tensor");
  check_like(kOp, output, input, "output_tensor", input.numel() * options_.size);
  auto comm = communicator(input.device(), kOp);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->all_gather(buffer, flat(input, true)), {{output, buffer}});
  return work(c10d::OpType::_ALLGATHER_BASE, kOp, comm, done, {output});
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), kPrefix, kOp, ": argument 'input_tensor_list' is empty");
  TORCH_CHECK(static_cast<int64_t>(output_lists.size()) == options_.size, kPrefix, kOp,
              ": argument 'output_tensor_lists' must hold one list per rank (", options_.size,
              "), got ", output_lists.size());
  for (const auto& input : inputs) {
    check_like(kOp, input, inputs[0], "input_tensor_list", input.numel());
  }
  std::vector<at::Tensor> targets;  // rank-major: every rank's copy of every input
  for (const auto& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(), kPrefix, kOp,
                ": each list of 'output_tensor_lists' must hold one tensor per input (",
                inputs.size(), "), got ", list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      check_like(kOp, list[i], inputs[i], "output_tensor_lists", inputs[i].numel());
      targets.push_back(list[i]);
    }
  }
  auto comm = communicator(inputs[0].device(), kOp);
  at::Tensor packed = concatenated(inputs, inputs[0]);
  at::Tensor gathered = at::empty({options_.size * packed.numel()}, packed.options());
  auto done = scatter_into(comm->all_gather(gathered, packed), gathered, targets);
  return work(c10d::OpType::ALLGATHER_COALESCED, kOp, comm, done, targets);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr std::string_view kOp = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), kPrefix, kOp,
              ": arguments 'outputs' and 'inputs' must be non-empty lists of one length, got ",
              outputs.size(), " and ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_dense(kOp, inputs[i], "inputs");
    check_like(kOp, outputs[i], inputs[i], "outputs", inputs[i].numel() * options_.size);
  }
  auto comm = communicator(inputs[0].device(), kOp);
  std::vector<Completion> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor buffer = flat(outputs[i], /*fill=*/false);
    parts.push_back(
        settle(comm->all_gather(buffer, flat(inputs[i], true)), {{outputs[i], buffer}}));
  }
  return work(c10d::OpType::COALESCED, kOp, comm, when_all(parts), outputs);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  constexpr std::string_view kOp = "gather";
  const at::Tensor& input = single(kOp, inputs, "input_tensors");
  check_root(kOp, opts.rootRank);
  const bool is_root = opts.rootRank == options_.rank;
  std::vector<at::Tensor> targets;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int64_t>(outputs[0].size()) == options_.size,
                kPrefix, kOp, ": on the root, argument 'output_tensors' must hold one list of ",
                options_.size, " tensors (one per rank)");
    for (const auto& output : outputs[0]) {
      check_like(kOp, output, input, "output_tensors", input.numel());
    }
    targets = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), kPrefix, kOp,
                ": argument 'output_tensors' must be empty on ranks other than the root");
  }
  auto comm = communicator(input.device(), kOp);
  at::Tensor gathered = at::empty({is_root ? options_.size * input.numel() : 0}, input.options());
  auto done =
      scatter_into(comm->gather(gathered, flat(input, true), opts.rootRank), gathered, targets);
  return work(c10d::OpType::GATHER, kOp, comm, done, targets);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  constexpr std::string_view kOp = "scatter";
  const at::Tensor& output = single(kOp, outputs, "output_tensors");
  check_root(kOp, opts.rootRank);
  const bool is_root = opts.rootRank == options_.rank;
  at::Tensor packed;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int64_t>(inputs[0].size()) == options_.size,
                kPrefix, kOp, ": on the root, argument 'input_tensors' must hold one list of ",
                options_.size, " tensors (one per rank)");
    for (const auto& input : inputs[0]) {
      check_like(kOp, input, output, "input_tensors", output.numel());
    }
    packed = concatenated(inputs[0], output);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), kPrefix, kOp,
                ": argument 'input_tensors' must be empty on ranks other than the root");
    packed = at::empty({0}, output.options());
  }
  auto comm = communicator(output.device(), kOp);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->scatter(buffer, packed, opts.rootRank), {{output, buffer}});
  return work(c10d::OpType::SCATTER, kOp, comm, done, outputs);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr std::string_view kOp = "reduce_scatter";
  const at::Tensor& output = single(kOp, outputs, "output");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int64_t>(inputs[0].size()) == options_.size,
              kPrefix, kOp, ": argument 'input_list' must hold one tensor per rank (",
              options_.size, ")");
  for (const auto& input : inputs[0]) {
    check_like(kOp, input, output, "input_list", output.numel());
  }
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduce_dtype(kOp, reduce_op, output.scalar_type());
  auto comm = communicator(output.device(), kOp);
  at::Tensor packed = concatenated(inputs[0], output);
  premultiply(kOp, opts.reduceOp, packed);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->reduce_scatter(buffer, packed, reduce_op), {{output, buffer}});
  return work(c10d::OpType::REDUCE_SCATTER, kOp, comm, done, outputs);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  constexpr std::string_view kOp = "reduce_scatter_tensor";
  check_dense(kOp, output, "output");
  check_like(kOp, input, output, "input", output.numel() * options_.size);
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  check_reduce_dtype(kOp, reduce_op, output.scalar_type());
  auto comm = communicator(output.device(), kOp);
  at::Tensor packed = flat(input, /*fill=*/true);
  if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
    packed = packed.clone();  // the caller's input stays as it was
    premultiply(kOp, opts.reduceOp, packed);
  }
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->reduce_scatter(buffer, packed, reduce_op), {{output, buffer}});
  return work(c10d::OpType::_REDUCE_SCATTER_BASE, kOp, comm, done, {output});
}

c10::intrusive_ptr<c10d::Work> FuncBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr std::string_view kOp = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), kPrefix, kOp,
              ": arguments 'outputs' and 'inputs' must be non-empty lists of one length, got ",
              outputs.size(), " and ", inputs.size());
  const ReduceOp reduce_op = to_reduce_op(kOp, opts.reduceOp);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_dense(kOp, outputs[i], "outputs");
    check_like(kOp, inputs[i], outputs[i], "inputs", outputs[i].numel() * options_.size);
    check_reduce_dtype(kOp, reduce_op, outputs[i].scalar_type());
  }
  auto comm = communicator(outputs[0].device(), kOp);
  std::vector<Completion> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor packed = flat(inputs[i], /*fill=*/true);
    if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
      packed = packed.clone();
      premultiply(kOp, opts.reduceOp, packed);
    }
    at::Tensor buffer = flat(outputs[i], /*fill=*/false);
    parts.push_back(
        settle(comm->reduce_scatter(buffer, packed, reduce_op), {{outputs[i], buffer}}));
  }
  return work(c10d::OpType::COALESCED, kOp, comm, when_all(parts), outputs);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_split_sizes,
                                                          std::vector<int64_t>& input_split_sizes,
                                                          const c10d::AllToAllOptions& opts) {
  constexpr std::string_view kOp = "all_to_all_single";
  check_dense(kOp, input, "input");
  check_like(kOp, output, input, "output", output.numel());
  // Splits count dim-0 rows; none means equal parts.
  const auto splits = [&](std::vector<int64_t> sizes, const at::Tensor& tensor,
                          std::string_view argument) {
    const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
    if (sizes.empty()) {
      TORCH_CHECK(rows % options_.size == 0, kPrefix, kOp, ": argument '", argument, "' has ", rows,
                  " rows, which do not split equally among ", options_.size,
                  " ranks; pass split sizes");
      return std::vector<int64_t>(options_.size, rows / options_.size);
    }
    TORCH_CHECK(static_cast<int64_t>(sizes.size()) == options_.size, kPrefix, kOp, ": argument '",
                argument, "_split_sizes' must hold one size per rank (", options_.size, "), got ",
                sizes.size());
    const int64_t sum = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    for (int64_t size : sizes) {
      TORCH_CHECK(size >= 0, kPrefix, kOp, ": argument '", argument,
                  "_split_sizes' holds a negative size ", size);
    }
    TORCH_CHECK(sum == rows, kPrefix, kOp, ": argument '", argument, "_split_sizes' sums to ", sum,
                " but '", argument, "' has ", rows, " rows");
    return sizes;
  };
  auto out_splits = splits(output_split_sizes, output, "output");
  auto in_splits = splits(input_split_sizes, input, "input");
  // On flat buffers a split counts elements: rows times the elements of a row (the shape past
  // dim 0, which an empty tensor also carries).
  const auto row_numel = [](const at::Tensor& tensor) {
    return tensor.dim() < 2 ? int64_t{1} : c10::multiply_integers(tensor.sizes().slice(1));
  };
  const int64_t row = row_numel(input);
  TORCH_CHECK(row == row_numel(output), kPrefix, kOp, ": rows of 'output' (", row_numel(output),
              " elements) and 'input' (", row, " elements) differ");
  for (auto& size : out_splits) size *= row;
  for (auto& size : in_splits) size *= row;
  auto comm = communicator(input.device(), kOp);
  at::Tensor buffer = flat(output, /*fill=*/false);
  auto done = settle(comm->all_to_all(buffer, flat(input, true), out_splits, in_splits),
                     {{output, buffer}});
  return work(c10d::OpType::ALLTOALL_BASE, kOp, comm, done, {output});
}

c10::intrusive_ptr<c10d::Work> FuncBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  constexpr std::string_view kOp = "all_to_all";
  TORCH_CHECK(static_cast<int64_t>(outputs.size()) == options_.size &&
                  static_cast<int64_t>(inputs.size()) == options_.size,
              kPrefix, kOp, ": arguments 'output_tensor_list' and 'input_tensor_list' must hold ",
              "one tensor per rank (", options_.size, "), got ", outputs.size(), " and ",
              inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_like(kOp, inputs[i], inputs[0], "input_tensor_list", inputs[i].numel());
    check_like(kOp, outputs[i], inputs[0], "output_tensor_list", outputs[i].numel());
  }
  std::vector<int64_t> out_splits, in_splits;
  for (size_t i = 0; i < inputs.size(); ++i) {
    out_splits.push_back(outputs[i].numel());
    in_splits.push_back(inputs[i].numel());
  }
  auto comm = communicator(inputs[0].device(), kOp);
  at::Tensor packed = concatenated(inputs, inputs[0]);
  at::Tensor received = at::empty({total_numel(outputs)}, inputs[0].options());
  auto done =
      scatter_into(comm->all_to_all(received, packed, out_splits, in_splits), received, outputs);
  return work(c10d::OpType::ALLTOALL, kOp, comm, done, outputs);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::barrier(const c10d::BarrierOptions& opts) {
  constexpr std::string_view kOp = "barrier";
  auto comm = communicator(c10::Device(c10::kCPU), kOp);
  at::Tensor token = at::zeros({1}, at::kInt);
  return work(c10d::OpType::BARRIER, kOp, comm, comm->all_reduce(token, ReduceOp::kSum), {});
}

c10::intrusive_ptr<c10d::Work> FuncBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  constexpr std::string_view kOp = "send";
  const at::Tensor& tensor = single(kOp, tensors, "tensor");
  check_peer(kOp, dst_rank);
  return work(c10d::OpType::SEND, kOp, nullptr, point_to_point_.send(tensor, dst_rank, tag),
              tensors);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  constexpr std::string_view kOp = "recv";
  const at::Tensor& tensor = single(kOp, tensors, "tensor");
  check_peer(kOp, src_rank);
  return work(c10d::OpType::RECV, kOp, nullptr, point_to_point_.recv(tensor, src_rank, tag),
              tensors, src_rank);
}

c10::intrusive_ptr<c10d::Work> FuncBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  TORCH_CHECK(false, kPrefix, "recv: a source rank is required (src=None, receiving from any ",
              "source, is not supported: messages travel on one channel per sender and ",
              "receiver); pass src=");
}

void split_device_communicators(FuncBackend& parent, FuncBackend* child, int64_t color,
                                int64_t key) {
  for (auto& [device, communicator] : parent.communicators()) {
    if (device.is_cpu()) {
      continue;  // the child formed its own among its members (shm and Gloo cannot split)
    }
    auto part = communicator->split(child ? color : -1, key);
    if (child && part) {
      child->adopt(device, std::move(part));
    }
  }
}

FuncBackend* as_func_backend(const c10::intrusive_ptr<c10d::Backend>& backend) {
  return dynamic_cast<FuncBackend*>(backend.get());
}

}  // namespace c10d_func
