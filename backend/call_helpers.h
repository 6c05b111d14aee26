#pragma once
// What the backend's collectives share (func_backend.cpp): c10d's options turned into
// c10d_func's, argument checks worded as torch's backends word them, and lists of tensors staged
// into the one dense buffer a Communicator takes.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "transports/communicator.h"
#include "transports/reduce_op.h"

#include <string_view>
#include <utility>
#include <vector>

namespace c10d_func::backend_detail {

constexpr const char* kPrefix = "c10d_func backend: ";

ReduceOp to_reduce_op(std::string_view op, const c10d::ReduceOp& reduce_op);

// PREMUL_SUM multiplies each member's contribution by its factor before summing.
void premultiply(std::string_view op, const c10d::ReduceOp& reduce_op, const at::Tensor& buffer);

void check_dense(std::string_view op, const at::Tensor& tensor, std::string_view argument);

const at::Tensor& single(std::string_view op, const std::vector<at::Tensor>& tensors,
                         std::string_view argument);

// `tensor` must match `like` in dtype, device and element count.
void check_like(std::string_view op, const at::Tensor& tensor, const at::Tensor& like,
                std::string_view argument, int64_t expected_numel);

// A contiguous 1-D view of `tensor` when it has one, else a fresh buffer (copied from `tensor`
// when `fill`); written back by `settle`.
at::Tensor flat(const at::Tensor& tensor, bool fill);

// Once `done`, copies each staging buffer into the caller's tensor it stands for (a no-op for
// buffers that are views of the tensor itself).
Completion settle(const Completion& done, std::vector<std::pair<at::Tensor, at::Tensor>> copies);

// Copies the pieces of a gathered 1-D buffer into `targets`, in order.
Completion scatter_into(const Completion& done, const at::Tensor& gathered,
                        std::vector<at::Tensor> targets);

at::Tensor concatenated(const std::vector<at::Tensor>& tensors, const at::Tensor& like);

int64_t total_numel(const std::vector<at::Tensor>& tensors);

}  // namespace c10d_func::backend_detail
