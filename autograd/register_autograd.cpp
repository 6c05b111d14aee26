// The Autograd registration of every op, from the one list (ops/op_list.h): an op with a
// formula gets its kernel (autograd_kernels.h); the others (messages and the out= forms, which
// torch does not differentiate either) get torch's standard "not implemented" node, so backward
// through them raises naming the op instead of silently giving no gradient, and without grad
// they run below autograd at no cost.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include "autograd/autograd_kernels.h"

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, Autograd, m) {
#define C10D_FUNC_AUTOGRAD_formula(name) m.impl(#name, &autograd_kernels::name);
#define C10D_FUNC_AUTOGRAD_none(name) \
  m.impl(#name, torch::autograd::autogradNotImplementedFallback());
#define C10D_FUNC_AUTOGRAD(name, schema, tags, autograd, lowering, effects) \
  C10D_FUNC_AUTOGRAD_##autograd(name)
  C10D_FUNC_OPS(C10D_FUNC_AUTOGRAD)
#undef C10D_FUNC_AUTOGRAD
#undef C10D_FUNC_AUTOGRAD_none
#undef C10D_FUNC_AUTOGRAD_formula
}

}  // namespace c10d_func
