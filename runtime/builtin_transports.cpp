// The built-in transports, registered in one place when the library loads: for CPU tensors
// "shm" (one host), "gloo" (any group) and "auto" (the default: shm inside a host, Gloo for a
// group that spans hosts); for CUDA tensors "nccl" (the default, when built with CUDA) and
// "gloo". Without Gloo's headers at build time the Python package adds "gloo"
// (transports/gloo/gloo_transport.h).
#include "runtime/group_registry.h"
#include "transports/gloo/gloo_transport.h"
#include "transports/hierarchy/hierarchical_communicator.h"
#include "transports/shm/shm_communicator.h"
#ifdef C10D_FUNC_WITH_CUDA
#include "transports/nccl/nccl_communicator.h"
#endif

#include <algorithm>

namespace c10d_func {
namespace {

// The CPU default ("auto"): members exchange their host identity through the store; a chunk on
// one host gets the shm transport, a chunk spanning hosts the hierarchy (shm inside each host,
// rail links or Gloo between hosts). Gloo is looked up only for a chunk that spans hosts: a
// program without it (C++ alone, where no Gloo maker is installed) still runs every group of one
// host.
std::shared_ptr<Communicator> make_auto_communicator(const Rendezvous& rendezvous) {
  const auto ids = exchange_host_identities(rendezvous);
  if (std::all_of(ids.begin(), ids.end(),
                  [&](const std::string& id) { return id == ids.front(); })) {
    return form_shm_communicator(rendezvous.under("shm/"));
  }
  return make_hierarchical(rendezvous.under("across/"), ids, &form_shm_communicator,
                           [](const Rendezvous& across) {
                             return GroupRegistry::instance()
                                 .find_transport("auto", c10::DeviceType::CPU, "gloo")
                                 .factory(across);
                           });
}

const bool kBuiltinTransportsAdded = [] {
  auto& registry = GroupRegistry::instance();
  registry.add_transport(c10::DeviceType::CPU, Transport{"shm", &make_shm_communicator});
  registry.add_transport(c10::DeviceType::CPU, Transport{"auto", &make_auto_communicator});
  if (auto make = native_gloo_maker()) {
    // Gloo moves CPU tensors, and CUDA tensors through host memory.
    registry.add_transport(c10::DeviceType::CPU, gloo_transport(*make));
    registry.add_transport(c10::DeviceType::CUDA, gloo_transport(*make));
  }
#ifdef C10D_FUNC_WITH_CUDA
  registry.add_transport(c10::DeviceType::CUDA,
                         Transport{"nccl", &make_nccl_communicator, /*splits_world=*/true});
#endif
  return true;
}();

}  // namespace
}  // namespace c10d_func
