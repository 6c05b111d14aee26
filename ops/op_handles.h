#pragma once
// Typed dispatcher handles for every c10d_func operator, derived from the one list
// (ops/op_list.h) and the one signature of each op (ops/op_signatures.h): code that calls the
// ops from C++ (the backward formulas, composites) goes through the full dispatcher, so a
// backward run under torch.compile records c10d_func ops like any other call.
// handles::all_reduce(self, "sum", tag, ranks, group_size) calls c10d_func::all_reduce.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "ops/op_list.h"
#include "ops/op_signatures.h"

#include <utility>

namespace c10d_func::handles {

// The handle of the op `name`, typed as its signature.
template <typename Signature>
c10::TypedOperatorHandle<Signature> lookup(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Signature>();
}

#define C10D_FUNC_HANDLE(name, ...)                                                      \
  template <typename... Args>                                                            \
  decltype(auto) name(Args&&... args) {                                                  \
    static const auto handle = lookup<decltype(::c10d_func::name)>("c10d_func::" #name); \
    return handle.call(std::forward<Args>(args)...);                                     \
  }
C10D_FUNC_OPS(C10D_FUNC_HANDLE)
#undef C10D_FUNC_HANDLE

}  // namespace c10d_func::handles
