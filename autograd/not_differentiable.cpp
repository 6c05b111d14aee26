// Autograd for the ops that torch's functional collectives give no derivative either: messages
// (isend, irecv, batch_p2p_ops) and the out= forms. An input that requires grad gets torch's
// standard "not implemented" node, so backward through them raises, naming the op, instead of
// silently giving no gradient; without grad they run below autograd at no cost.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

namespace c10d_func {

TORCH_LIBRARY_IMPL(c10d_func, Autograd, m) {
  for (const char* name : {"isend", "irecv", "batch_p2p_ops", "all_gather_into_tensor_out",
                           "reduce_scatter_tensor_out"}) {
    m.impl(name, torch::autograd::autogradNotImplementedFallback());
  }
}

} // namespace c10d_func
