#pragma once
// The Autograd kernel of every op that has a backward formula (autograd/reductions.cpp,
// gathers.cpp, movement.cpp), declared from the one list (ops/op_list.h) with each op's one
// signature (ops/op_signatures.h); registered in autograd/register_autograd.cpp.
#include "ops/op_list.h"
#include "ops/op_signatures.h"

namespace c10d_func::autograd_kernels {

#define C10D_FUNC_DECLARE_formula(name) decltype(::c10d_func::name) name;
#define C10D_FUNC_DECLARE_none(name)
#define C10D_FUNC_DECLARE(name, schema, tags, autograd, lowering, effects) \
  C10D_FUNC_DECLARE_##autograd(name)
C10D_FUNC_OPS(C10D_FUNC_DECLARE)
#undef C10D_FUNC_DECLARE
#undef C10D_FUNC_DECLARE_none
#undef C10D_FUNC_DECLARE_formula

}  // namespace c10d_func::autograd_kernels
