// The kernels of every c10d_func operator, for any device with a transport. Each one checks its
// own arguments, allocates a fresh contiguous output (shapes from ops/shape_rules, the same the
// Meta kernels give), issues the collective on the chunk's communicator for the input's device
// and returns at once; the output is recorded as pending until wait_tensor. What differs by
// device lives in the communicator and its Completion: on CPU waiting blocks the host, on CUDA
// it makes the current stream wait on the collective's event. kernels/cpu and kernels/cuda
// register these functions for their dispatch keys.
#include <ATen/ATen.h>
#include "ops/op_signatures.h"

#include "ops/shape_rules.h"
#include "ops/tensor_checks.h"
#include "runtime/collective_call.h"
#include "runtime/pending_work.h"
#include "transports/reduce_op.h"

#include <string_view>

namespace c10d_func {
namespace {

std::vector<int64_t> concrete(const SymShape& shape) {
  std::vector<int64_t> sizes;
  sizes.reserve(shape.size());
  for (const auto& size : shape) {
    sizes.push_back(size.expect_int());
  }
  return sizes;
}

// Outputs come from the communicator: the shm transport places large ones in symmetric memory,
// where the members write them in place.
at::Tensor new_output(const CollectiveCall& call, const SymShape& shape, const at::Tensor& like) {
  return call.communicator().new_output(concrete(shape), like.options());
}

at::Tensor output_like(const CollectiveCall& call, const at::Tensor& like) {
  return call.communicator().new_output(like.sizes(), like.options());
}

ReduceOp checked_reduce_op(std::string_view op, std::string_view name, const at::Tensor& self) {
  const ReduceOp reduce_op = parse_reduce_op(op, name);
  check_reduce_dtype(op, reduce_op, self.scalar_type());
  return reduce_op;
}

// What a coalesced reduction checks before any world: the group's shape, the reduction and each
// tensor's dtype for it, one device.
ReduceOp checked_coalesced_reduction(std::string_view op, std::string_view name,
                                     at::TensorList tensors, at::IntArrayRef ranks,
                                     int64_t group_size) {
  check_group_shape(op, ranks, group_size);
  const ReduceOp reduce_op = parse_reduce_op(op, name);
  for (const auto& tensor : tensors) {
    check_reduce_dtype(op, reduce_op, tensor.scalar_type());
  }
  check_same_device(op, tensors);
  return reduce_op;
}

// Runs `buffer` (a contiguous copy or the tensor itself) through an in-place collective and, when
// it is a copy, writes the result back into `target` once the collective is done.
Completion into(const at::Tensor& target, const at::Tensor& buffer, const Completion& completion) {
  if (buffer.is_same(target)) {
    return completion;
  }
  return then_run(completion, target, {buffer}, [target, buffer] { target.copy_(buffer); });
}

at::Tensor all_gather_one(const CollectiveCall& call, std::string_view op, const at::Tensor& self) {
  at::Tensor output =
      new_output(call, gathered_shape(op, self.sym_sizes(), call.group_size()), self);
  at::Tensor input = call.sendable_in_own_block(self, output);
  call.record(output, call.communicator().all_gather(output, input));
  return output;
}

at::Tensor reduce_scatter_one(const CollectiveCall& call, std::string_view op,
                              const at::Tensor& self, ReduceOp reduce_op) {
  at::Tensor input = call.sendable(self);
  at::Tensor output =
      new_output(call, scattered_shape(op, self.sym_sizes(), call.group_size()), self);
  call.record(output, call.communicator().reduce_scatter(output, input, reduce_op));
  return output;
}

std::vector<int64_t> even_splits(int64_t rows, int64_t group_size) {
  return std::vector<int64_t>(group_size, rows / group_size);
}

}  // namespace

at::Tensor all_reduce(const at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                      at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_reduce";
  const ReduceOp op = checked_reduce_op(kOp, reduce_op, self);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  at::Tensor output = output_like(call, self);
  call.record(output, call.communicator().all_reduce_into(output, self.contiguous(), op));
  return output;
}

void all_reduce_(at::Tensor& self, c10::string_view reduce_op, c10::string_view tag,
                 at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_reduce_";
  const ReduceOp op = checked_reduce_op(kOp, reduce_op, self);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  at::Tensor buffer = self.contiguous();
  call.record(self, into(self, buffer, call.communicator().all_reduce(buffer, op)));
}

std::vector<at::Tensor> all_reduce_coalesced(at::TensorList self, c10::string_view reduce_op,
                                             c10::string_view tag, at::IntArrayRef ranks,
                                             int64_t group_size) {
  constexpr std::string_view kOp = "all_reduce_coalesced";
  const ReduceOp op = checked_coalesced_reduction(kOp, reduce_op, self, ranks, group_size);
  std::vector<at::Tensor> outputs;
  if (self.empty()) {
    return outputs;
  }
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  for (const auto& tensor : self) {
    at::Tensor output = output_like(call, tensor);
    call.record(output, call.communicator().all_reduce_into(output, tensor.contiguous(), op));
    outputs.push_back(std::move(output));
  }
  return outputs;
}

void all_reduce_coalesced_(at::TensorList self, c10::string_view reduce_op, c10::string_view tag,
                           at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_reduce_coalesced_";
  const ReduceOp op = checked_coalesced_reduction(kOp, reduce_op, self, ranks, group_size);
  if (self.empty()) {
    return;
  }
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  for (const auto& tensor : self) {
    at::Tensor buffer = tensor.contiguous();
    call.record(tensor, into(tensor, buffer, call.communicator().all_reduce(buffer, op)));
  }
}

at::Tensor all_gather_into_tensor(const at::Tensor& self, c10::string_view tag,
                                  at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_gather_into_tensor";
  CollectiveCall call(kOp, self, tag, ranks, group_size);
  return all_gather_one(call, kOp, self);
}

void all_gather_into_tensor_out(const at::Tensor& self, c10::string_view tag, at::IntArrayRef ranks,
                                int64_t group_size, at::Tensor& out) {
  constexpr std::string_view kOp = "all_gather_into_tensor_out";
  check_group_shape(kOp, ranks, group_size);
  check_out(kOp, self, out, gathered_shape(kOp, self.sym_sizes(), group_size));
  CollectiveCall call(kOp, self, tag, ranks, group_size);
  at::Tensor buffer = out.contiguous();
  call.record(
      out, into(out, buffer,
                call.communicator().all_gather(buffer, call.sendable_in_own_block(self, buffer))));
}

std::vector<at::Tensor> all_gather_into_tensor_coalesced(at::TensorList self, c10::string_view tag,
                                                         at::IntArrayRef ranks,
                                                         int64_t group_size) {
  constexpr std::string_view kOp = "all_gather_into_tensor_coalesced";
  check_group_shape(kOp, ranks, group_size);
  check_same_device(kOp, self);
  std::vector<at::Tensor> outputs;
  if (self.empty()) {
    return outputs;
  }
  CollectiveCall call(kOp, self, tag, ranks, group_size);
  for (const auto& tensor : self) {
    outputs.push_back(all_gather_one(call, kOp, tensor));
  }
  return outputs;
}

at::Tensor reduce_scatter_tensor(const at::Tensor& self, c10::string_view reduce_op,
                                 c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "reduce_scatter_tensor";
  check_group_shape(kOp, ranks, group_size);
  const ReduceOp op = checked_reduce_op(kOp, reduce_op, self);
  (void)scattered_shape(kOp, self.sym_sizes(), group_size);  // shape errors before any world
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  return reduce_scatter_one(call, kOp, self, op);
}

void reduce_scatter_tensor_out(const at::Tensor& self, c10::string_view reduce_op,
                               c10::string_view tag, at::IntArrayRef ranks, int64_t group_size,
                               at::Tensor& out) {
  constexpr std::string_view kOp = "reduce_scatter_tensor_out";
  check_group_shape(kOp, ranks, group_size);
  const ReduceOp op = checked_reduce_op(kOp, reduce_op, self);
  check_out(kOp, self, out, scattered_shape(kOp, self.sym_sizes(), group_size));
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  at::Tensor buffer = out.contiguous();
  call.record(
      out, into(out, buffer, call.communicator().reduce_scatter(buffer, call.sendable(self), op)));
}

std::vector<at::Tensor> reduce_scatter_tensor_coalesced(at::TensorList self,
                                                        c10::string_view reduce_op,
                                                        c10::string_view tag, at::IntArrayRef ranks,
                                                        int64_t group_size) {
  constexpr std::string_view kOp = "reduce_scatter_tensor_coalesced";
  check_group_shape(kOp, ranks, group_size);
  const ReduceOp op = parse_reduce_op(kOp, reduce_op);
  for (const auto& tensor : self) {
    check_reduce_dtype(kOp, op, tensor.scalar_type());
    (void)scattered_shape(kOp, tensor.sym_sizes(), group_size);
  }
  check_same_device(kOp, self);
  std::vector<at::Tensor> outputs;
  if (self.empty()) {
    return outputs;
  }
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op});
  for (const auto& tensor : self) {
    outputs.push_back(reduce_scatter_one(call, kOp, tensor, op));
  }
  return outputs;
}

at::Tensor all_to_all_single(const at::Tensor& self, at::OptionalSymIntArrayRef output_split_sizes,
                             at::OptionalSymIntArrayRef input_split_sizes, c10::string_view tag,
                             at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "all_to_all_single";
  check_group_shape(kOp, ranks, group_size);
  const auto shape =
      all_to_all_shape(kOp, self.sym_sizes(), output_split_sizes, input_split_sizes, group_size);
  const auto output_shape = concrete(shape);
  auto out_splits = output_split_sizes
                        ? concrete(output_split_sizes->vec())
                        : even_splits(output_shape.empty() ? 1 : output_shape[0], group_size);
  auto in_splits = input_split_sizes ? concrete(input_split_sizes->vec())
                                     : even_splits(self.dim() == 0 ? 1 : self.size(0), group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size,
                      {.same_rows = false, .input_splits = in_splits, .output_splits = out_splits});
  at::Tensor input = call.sendable(self);
  at::Tensor output = call.communicator().new_output(output_shape, self.options());
  call.record(output, call.communicator().all_to_all(output, input, std::move(out_splits),
                                                     std::move(in_splits)));
  return output;
}

at::Tensor broadcast(const at::Tensor& self, int64_t src, c10::string_view tag,
                     at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "broadcast";
  check_group_shape(kOp, ranks, group_size);
  check_group_index(kOp, "src", src, group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.root = src});
  at::Tensor output = output_like(call, self);
  call.record(output, call.communicator().broadcast_into(output, self.contiguous(), src));
  return output;
}

void broadcast_(at::Tensor& self, int64_t src, c10::string_view tag, at::IntArrayRef ranks,
                int64_t group_size) {
  constexpr std::string_view kOp = "broadcast_";
  check_group_shape(kOp, ranks, group_size);
  check_group_index(kOp, "src", src, group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.root = src});
  at::Tensor buffer = self.contiguous();
  call.record(self, into(self, buffer, call.communicator().broadcast(buffer, src)));
}

at::Tensor reduce(const at::Tensor& self, c10::string_view reduce_op, int64_t dst,
                  c10::string_view tag, at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "reduce";
  check_group_shape(kOp, ranks, group_size);
  const ReduceOp op = checked_reduce_op(kOp, reduce_op, self);
  check_group_index(kOp, "dst", dst, group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.reduce_op = reduce_op, .root = dst});
  at::Tensor output = output_like(call, self);
  output.copy_(self);
  Completion done = call.communicator().reduce(output, dst, op);
  if (call.index() != dst) {
    // The transport may leave partial results on non-root members; the contract says zeros.
    done = then_run(done, output, {}, [output] { output.zero_(); });
  }
  call.record(output, done);
  return output;
}

at::Tensor gather(const at::Tensor& self, int64_t dst, c10::string_view tag, at::IntArrayRef ranks,
                  int64_t group_size) {
  constexpr std::string_view kOp = "gather";
  check_group_shape(kOp, ranks, group_size);
  check_group_index(kOp, "dst", dst, group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.root = dst});
  const auto shape = concrete(gathered_shape(kOp, self.sym_sizes(), group_size));
  const auto options = self.options().memory_format(at::MemoryFormat::Contiguous);
  // Only dst receives; everyone else's output is defined as zeros, written once this member's
  // part is on its way (no transport touches a non-root's output), from the communicator's
  // reused blocks (a large fresh one would fault in every page).
  at::Tensor output = call.communicator().new_output(shape, options);
  call.record(output, call.communicator().gather(output, call.sendable(self), dst));
  if (call.index() != dst) {
    output.zero_();
  }
  return output;
}

at::Tensor scatter(const at::Tensor& self, int64_t src, c10::string_view tag, at::IntArrayRef ranks,
                   int64_t group_size) {
  constexpr std::string_view kOp = "scatter";
  check_group_shape(kOp, ranks, group_size);
  check_group_index(kOp, "src", src, group_size);
  const auto shape = scattered_shape(kOp, self.sym_sizes(), group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.root = src});
  at::Tensor output = new_output(call, shape, self);
  // Only src's input is read (by every transport): the others' is not copied.
  const at::Tensor sent = call.index() == src ? call.sendable(self) : self;
  call.record(output, call.communicator().scatter(output, sent, src));
  return output;
}

at::Tensor permute(const at::Tensor& self, at::IntArrayRef src_dst, c10::string_view tag,
                   at::IntArrayRef ranks, int64_t group_size) {
  constexpr std::string_view kOp = "permute";
  check_group_shape(kOp, ranks, group_size);
  const auto sender_of = check_permutation(kOp, src_dst, group_size);
  CollectiveCall call(kOp, self, tag, ranks, group_size, {.permutation = src_dst});
  at::Tensor input = call.sendable(self);
  at::Tensor output = output_like(call, input);
  const int64_t me = call.index();
  // A permutation is an all-to-all where each member sends everything to one peer.
  const int64_t rows = input.dim() == 0 ? 1 : input.size(0);
  std::vector<int64_t> in_splits(group_size, 0);
  std::vector<int64_t> out_splits(group_size, 0);
  in_splits[src_dst[me]] = rows;
  out_splits[sender_of[me]] = rows;
  call.record(output, call.communicator().all_to_all(output, input, std::move(out_splits),
                                                     std::move(in_splits)));
  return output;
}

at::Tensor wait_tensor(const at::Tensor& self) {
  wait_pending(self);
  return self;
}

}  // namespace c10d_func
