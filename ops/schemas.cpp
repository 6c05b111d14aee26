// The one TORCH_LIBRARY(c10d_func, m): every operator's schema, from the one list
// (ops/op_list.h). Kernels live in kernels/cpu, kernels/cuda, meta and autograd, each registered
// for its own dispatch key.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "ops/op_list.h"

#include <vector>

TORCH_LIBRARY(c10d_func, m) {
  const std::vector<at::Tag> pt2{at::Tag::pt2_compliant_tag};
  const std::vector<at::Tag> rows{at::Tag::pt2_compliant_tag, at::Tag::needs_contiguous_strides};
#define C10D_FUNC_DEF(name, schema, tags, ...) m.def(#name schema, tags);
  C10D_FUNC_OPS(C10D_FUNC_DEF)
  C10D_FUNC_COMPOSITE_OPS(C10D_FUNC_DEF)
#undef C10D_FUNC_DEF
}
