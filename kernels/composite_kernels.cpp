// Operators defined by others: registered for CompositeImplicitAutograd, so they decompose
// before any device, Meta or Autograd kernel runs and inherit those of what they call.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "ops/op_handles.h"

#include <vector>

namespace c10d_func {
namespace {

std::vector<at::Tensor> wait_tensors(at::TensorList tensors) {
  std::vector<at::Tensor> waited;
  waited.reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) {
    waited.push_back(handles::wait_tensor(tensor));
  }
  return waited;
}

}  // namespace

TORCH_LIBRARY_IMPL(c10d_func, CompositeImplicitAutograd, m) {
  C10D_FUNC_COMPOSITE_OPS(C10D_FUNC_IMPL_ONE)
}

}  // namespace c10d_func
