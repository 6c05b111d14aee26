// See autograd_support.h.
#include "autograd/autograd_support.h"

#include "ops/op_handles.h"

namespace c10d_func {

at::Tensor waited_as(const at::Tensor& pending, const at::Tensor& like) {
  at::Tensor done = handles::wait_tensor(pending);
  return done.sizes() == like.sizes() ? done : done.reshape(like.sizes());
}

} // namespace c10d_func
