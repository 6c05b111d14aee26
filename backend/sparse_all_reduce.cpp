// See sparse_all_reduce.h.
#include "backend/sparse_all_reduce.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/accumulate.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

namespace c10d_func {
namespace {

// A member's description: [dims, sparse dims, entries, sizes of each dim (padded)].
constexpr int64_t kMaxDims = 32;
constexpr int64_t kDescription = 3 + kMaxDims;

std::string shape_of(const int64_t* row) {
  std::ostringstream text;
  text << "[";
  for (int64_t d = 0; d < row[0]; ++d) {
    text << (d ? ", " : "") << row[3 + d];
  }
  text << "] with " << row[1] << " sparse dims";
  return text.str();
}

}  // namespace

Completion sparse_all_reduce(Communicator& communicator, const at::Tensor& tensor,
                             const std::string& what) {
  at::AutoDispatchBelowAutograd below;
  const at::Tensor mine = tensor.coalesce();
  const int64_t dims = mine.dim();
  const int64_t sparse_dims = mine.sparse_dim();
  TORCH_CHECK(dims <= kMaxDims, "c10d_func backend: ", what, ": sparse tensors of up to ", kMaxDims,
              " dims are reduced, got ", dims);
  const int64_t size = communicator.size();
  at::Tensor description = at::zeros({kDescription}, at::kLong);
  auto* own = description.data_ptr<int64_t>();
  own[0] = dims;
  own[1] = sparse_dims;
  own[2] = mine._nnz();
  for (int64_t d = 0; d < dims; ++d) {
    own[3 + d] = mine.size(d);
  }
  at::Tensor descriptions = at::empty({size * kDescription}, at::kLong);
  const Completion described = communicator.all_gather(descriptions, description);
  wait_completion(described);
  if (described->hasError()) {
    std::rethrow_exception(described->exception_ptr());  // `descriptions` holds nothing then
  }

  // Every member's description comes from a peer: bounded before it sizes anything.
  const auto* all = descriptions.data_ptr<int64_t>();
  int64_t most = 0;
  std::vector<int64_t> entries(size);
  // A coalesced tensor holds at most one entry per position of its sparse dims (a product that
  // may pass int64: then any count is possible).
  uint64_t positions = 0;
  const auto sparse_sizes = mine.sizes().slice(0, sparse_dims);
  const int64_t most_entries =
      c10::safe_multiplies_u64(sparse_sizes, &positions) ||
              positions > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
          ? std::numeric_limits<int64_t>::max()
          : static_cast<int64_t>(positions);
  for (int64_t m = 0; m < size; ++m) {
    const int64_t* row = all + m * kDescription;
    TORCH_CHECK(std::equal(row, row + 2, own) && std::equal(row + 3, row + 3 + dims, own + 3),
                "c10d_func backend: ", what, ": Sparse dimensions do not match (member ", m,
                " has shape ", shape_of(row), ", this member ", shape_of(own), ")");
    TORCH_CHECK(row[2] >= 0 && row[2] <= most_entries, "c10d_func backend: ", what, ": member ", m,
                " reports ", row[2], " entries, more than its coalesced tensor can hold");
    entries[m] = row[2];
    most = std::max(most, row[2]);
  }

  // Padded to the largest count, so the gathers are of equal parts.
  const at::Tensor values = mine._values();
  at::Tensor indices_out = at::zeros({sparse_dims, most}, at::kLong);
  indices_out.narrow(1, 0, mine._nnz()).copy_(mine._indices());
  std::vector<int64_t> value_shape = values.sizes().vec();
  value_shape[0] = most;
  at::Tensor values_out = at::zeros(value_shape, values.options());
  values_out.narrow(0, 0, mine._nnz()).copy_(values);
  at::Tensor indices_in = at::empty({size * sparse_dims * most}, at::kLong);
  at::Tensor values_in = at::empty({size * values_out.numel()}, values.options());
  Completion indices_done = communicator.all_gather(indices_in, indices_out.view(-1));
  Completion values_done = communicator.all_gather(values_in, values_out.view(-1));

  const at::Tensor target = tensor;
  auto finish = [=] {
    at::AutoDispatchBelowAutograd below_autograd;
    std::vector<at::Tensor> index_parts;
    std::vector<at::Tensor> value_parts;
    const auto per_member_values = values_in.view([&] {
      std::vector<int64_t> shape{size};
      shape.insert(shape.end(), value_shape.begin(), value_shape.end());
      return shape;
    }());
    const auto per_member_indices = indices_in.view({size, sparse_dims, most});
    for (int64_t m = 0; m < size; ++m) {
      index_parts.push_back(per_member_indices[m].narrow(1, 0, entries[m]));
      value_parts.push_back(per_member_values[m].narrow(0, 0, entries[m]));
    }
    const at::Tensor indices = at::cat(index_parts, 1);
    const at::Tensor summed_values = at::cat(value_parts, 0);
    // Indices came from peers: each must lie inside the tensor before it is used.
    if (indices.numel() > 0) {
      const at::Tensor bounds =
          at::tensor(mine.sizes().slice(0, sparse_dims).vec(), at::kLong).unsqueeze(1);
      TORCH_CHECK(indices.ge(0).all().item<bool>() && indices.lt(bounds).all().item<bool>(),
                  "c10d_func backend: ", what,
                  ": a member sent indices outside the tensor's shape");
    }
    const at::Tensor sum =
        at::_sparse_coo_tensor_unsafe(indices, summed_values, mine.sizes(), mine.options())
            .coalesce();
    target.copy_(sum);
  };
  // The indices' gather was issued first on the same communicator: done by the values' end
  // (the wait below only collects its outcome).
  // Sparse tensors are reduced on the CPU: no device stream touches them.
  return then_run(values_done, values_in, {}, [indices_done, finish] {
    wait_completion(indices_done);
    if (indices_done->hasError()) {
      std::rethrow_exception(indices_done->exception_ptr());
    }
    finish();
  });
}

}  // namespace c10d_func
