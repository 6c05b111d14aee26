// See tensor_checks.h.
#include "ops/tensor_checks.h"

#include <c10/util/Exception.h>

namespace c10d_func {

void check_same_device(std::string_view op, at::TensorList tensors) {
  for (const auto& tensor : tensors) {
    TORCH_CHECK(
        tensor.device() == tensors[0].device(), "c10d_func.", op,
        ": argument 'self' mixes devices (", tensors[0].device(), " and ", tensor.device(),
        "); a coalesced call runs on one device");
  }
}

} // namespace c10d_func
