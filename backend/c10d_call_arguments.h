#pragma once
// What the backend's collectives share (func_backend.cpp): c10d's options turned into
// c10d_func's, argument checks worded as torch's backends word them, and lists of tensors staged
// into the one dense buffer a Communicator takes.
//
// Every check raises what ProcessGroupGloo raises for the same mistake (a RuntimeError with
// Gloo's phrase: "invalid root rank: 5", "requires a single-element tensor list", "invalid tensor
// type at index 1 (...)"), after "c10d_func backend: <op>: " where Gloo puts
// "ProcessGroupGloo::<op>: ", and c10d_func's detail in parentheses after the phrase, so programs,
// tests and log scanners written against Gloo match either.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "transports/communicator.h"
#include "transports/reduce_op.h"

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace c10d_func::backend_detail {

constexpr const char* kPrefix = "c10d_func backend: ";

ReduceOp to_reduce_op(std::string_view op, const c10d::ReduceOp& reduce_op);

// PREMUL_SUM multiplies each member's contribution by its factor before summing.
void premultiply(std::string_view op, const c10d::ReduceOp& reduce_op, const at::Tensor& buffer);

// The reduction is defined for `dtype` (Gloo's "Cannot use ReduceOp.BAND with non-integral
// dtype" for bitwise ones on floats; c10d_func's own rules otherwise).
void check_reduction(std::string_view op, ReduceOp reduce_op, c10::ScalarType dtype);

void check_dense(std::string_view op, const at::Tensor& tensor, std::string_view argument);

// The one tensor of `tensors`; `phrase` is Gloo's for the list ("requires a single-element
// tensor list", "... input tensor list", "... output tensor list").
const at::Tensor& single(std::string_view op, const std::vector<at::Tensor>& tensors,
                         std::string_view argument,
                         std::string_view phrase = "requires a single-element tensor list");

// `root` names a rank of a group of `size` ("invalid root rank: 5").
void check_root_rank(std::string_view op, int64_t root, int64_t size);
// `root_tensor` indexes a list of one tensor ("invalid root tensor: 1").
void check_root_tensor(std::string_view op, int64_t root_tensor, size_t tensors);

// `tensor` (entry `index` of `argument`) must match `like` in dtype, device and element count.
void check_like(std::string_view op, const at::Tensor& tensor, const at::Tensor& like,
                std::string_view argument, int64_t expected_numel, size_t index = 0);

// A contiguous 1-D view of `tensor` when it has one, else a fresh buffer (copied from `tensor`
// when `fill`); written back by `settle`.
at::Tensor flat(const at::Tensor& tensor, bool fill);

// Once `done`, copies each staging buffer into the caller's tensor it stands for (a no-op for
// buffers that are views of the tensor itself).
Completion settle(const Completion& done, std::vector<std::pair<at::Tensor, at::Tensor>> copies);

// Copies the pieces of a gathered 1-D buffer into `targets`, in order.
Completion scatter_into(const Completion& done, const at::Tensor& gathered,
                        std::vector<at::Tensor> targets);

// gather's outputs / scatter's inputs (`side`: "output", "input"): on the root one list of one
// tensor like `like` per member of a group of `members`, returned; elsewhere nothing (empty).
std::vector<at::Tensor> root_list(std::string_view op,
                                  const std::vector<std::vector<at::Tensor>>& lists,
                                  const at::Tensor& like, std::string_view side, bool is_root,
                                  int64_t members);

// all_to_all's split sizes of `argument` (dim-0 rows, one per member of a group of `members`),
// checked against `tensor`; none means equal parts.
std::vector<int64_t> row_splits(std::string_view op, std::vector<int64_t> sizes,
                                const at::Tensor& tensor, std::string_view argument,
                                int64_t members);

// The tensors flattened end to end, in a staging buffer from `comm` (new_output: symmetric memory
// on shm, which the members then read in place; reused private memory elsewhere).
at::Tensor concatenated(Communicator& comm, const std::vector<at::Tensor>& tensors,
                        const at::Tensor& like);

// Where the tensors are contiguous views of one storage, each starting where the one before ends
// (`list(x.chunk(n))`), one flat view over them all; else nothing.
std::optional<at::Tensor> end_to_end_view(const std::vector<at::Tensor>& tensors);

// The tensors end to end as one flat tensor that only reads them: end_to_end_view's (no copy; a
// classic call's caller leaves its inputs alone until the wait), else concatenated.
at::Tensor read_end_to_end(Communicator& comm, const std::vector<at::Tensor>& tensors,
                           const at::Tensor& like);

// Where a collective writing `numel` elements end to end into `targets` writes them: their
// end_to_end_view, which they then hold with no copy (`targets` is emptied), else a staging
// buffer of `comm` to scatter_into them.
at::Tensor write_end_to_end(Communicator& comm, std::vector<at::Tensor>& targets, int64_t numel,
                            const at::Tensor& like);

// A flat staging buffer of `numel` elements like `like`, from `comm` (see concatenated).
at::Tensor staging_buffer(Communicator& comm, int64_t numel, const at::Tensor& like);

int64_t total_numel(const std::vector<at::Tensor>& tensors);

}  // namespace c10d_func::backend_detail
