#pragma once
// NCCL refuses two ranks of one communicator on one GPU; the members of a chunk compare their
// GPUs' identities first, so the error names the ranks that share one (the rule itself,
// torch-free and tested: device_sharing.h).
#include <c10/core/Device.h>

#include "transports/rendezvous.h"

#include <string>

namespace c10d_func::nccl {

// "GPU-<uuid in hex>": the device's identity across processes, whatever CUDA_VISIBLE_DEVICES
// each process was given.
std::string device_identity(c10::DeviceIndex index);

// Every member publishes its GPU's identity; two members on one GPU fail here, on every member,
// with the ranks named, instead of in ncclCommInitRankConfig as "invalid usage".
void check_one_rank_per_device(const Rendezvous& rendezvous);

}  // namespace c10d_func::nccl
