// See tensor_checks.h.
#include "ops/tensor_checks.h"

#include <c10/util/Exception.h>

namespace c10d_func {

void check_same_device(std::string_view op, at::TensorList tensors) {
  for (const auto& tensor : tensors) {
    TORCH_CHECK(tensor.device() == tensors[0].device(), "c10d_func.", op,
                ": argument 'self' mixes devices (", tensors[0].device(), " and ", tensor.device(),
                "); a coalesced call runs on one device");
  }
}

void check_out(std::string_view op, const at::Tensor& self, const at::Tensor& out,
               c10::SymIntArrayRef expected_shape) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type() && out.device() == self.device(),
              "c10d_func.", op, ": argument 'out' is ", out.scalar_type(), " on ", out.device(),
              ", expected ", self.scalar_type(), " on ", self.device(), " (as 'self')");
  TORCH_CHECK(out.sym_sizes().equals(expected_shape), "c10d_func.", op,
              ": argument 'out' has shape ", out.sym_sizes(), ", expected ", expected_shape);
}

void check_message_lists(std::string_view op, c10::ArrayRef<std::string> op_list, size_t peers,
                         size_t tags, size_t tensors) {
  TORCH_CHECK(op_list.size() == peers && peers == tags && tags == tensors, "c10d_func.", op,
              ": op_list, peer_list, tag_list and tensors must have one entry per message (got ",
              op_list.size(), ", ", peers, ", ", tags, " and ", tensors, ")");
  for (const auto& name : op_list) {
    TORCH_CHECK(name == "isend" || name == "irecv", "c10d_func.", op, ": op_list entry '", name,
                "' is neither 'isend' nor 'irecv'");
  }
}

}  // namespace c10d_func
