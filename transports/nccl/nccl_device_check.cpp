// The one-rank-per-GPU check; see nccl_device_check.h.
#include "transports/nccl/nccl_device_check.h"

#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

#include "transports/nccl/device_sharing.h"

namespace c10d_func::nccl {

std::string device_identity(c10::DeviceIndex index) {
  cudaDeviceProp properties{};
  const cudaError_t status = cudaGetDeviceProperties(&properties, index);
  TORCH_CHECK(status == cudaSuccess, "c10d_func: cudaGetDeviceProperties(", static_cast<int>(index),
              ") failed: ", cudaGetErrorString(status));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "GPU-";
  for (const char byte : properties.uuid.bytes) {
    const auto value = static_cast<unsigned char>(byte);
    id += kHex[value >> 4];
    id += kHex[value & 15];
  }
  return id;
}

void check_one_rank_per_device(const Rendezvous& rendezvous) {
  const auto ids =
      store_all_gather_text(rendezvous, "device", device_identity(rendezvous.device.index()));
  if (auto problem = shared_device_problem(ids, rendezvous.members)) {
    TORCH_CHECK(false, "c10d_func: ", *problem);
  }
}

}  // namespace c10d_func::nccl
