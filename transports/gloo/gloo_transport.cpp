// The Gloo transport; see gloo_transport.h.
#include "transports/gloo/gloo_transport.h"

#include "transports/c10d/group_communicator.h"
#include "transports/host_address.h"

#ifdef C10D_FUNC_WITH_GLOO_HEADERS
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#endif

namespace c10d_func {

#ifdef C10D_FUNC_WITH_GLOO_HEADERS
namespace {

// The device Gloo binds to: the interfaces GLOO_SOCKET_IFNAME names; else torch's default (the
// address this host's name resolves to) where that is not loopback; else the address of the
// interface that reaches the world's store (MASTER_ADDR), which every member can reach as it
// reaches the store. torch falls back to loopback there, which peers on other hosts cannot reach
// (a host whose name is not in DNS or /etc/hosts: containers, namespaces, many clusters).
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices() {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME");
  if (interfaces != nullptr && *interfaces != '\0') {
    std::stringstream names(interfaces);
    for (std::string name; std::getline(names, name, ',');) {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
    return devices;
  }
  const char* store_host = std::getenv("MASTER_ADDR");
  if (!hostname_address() && store_host != nullptr && *store_host != '\0') {
    if (auto address = address_towards(store_host)) {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(*address));
      return devices;
    }
  }
  devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return devices;
}

}  // namespace
#endif

Transport gloo_transport(GlooMaker make) {
  Transport transport;
  transport.name = "gloo";
  transport.needs_roll_call = true;
  transport.factory = [make = std::move(make)](const Rendezvous& rendezvous) {
    return make_backend_communicator(make(rendezvous));
  };
  return transport;
}

std::optional<GlooMaker> native_gloo_maker() {
#ifdef C10D_FUNC_WITH_GLOO_HEADERS
  return GlooMaker([](const Rendezvous& rendezvous) -> c10::intrusive_ptr<c10d::Backend> {
    // As dist.ProcessGroupGloo(store, rank, size, timeout) makes it, but for the device when
    // this host's name does not resolve (gloo_devices); two threads per device.
    auto options = c10d::ProcessGroupGloo::Options::create(rendezvous.timeout);
    options->devices = gloo_devices();
    options->threads = static_cast<int>(options->devices.size()) * 2;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(rendezvous.store,
                                                       static_cast<int>(rendezvous.rank),
                                                       static_cast<int>(rendezvous.size), options);
  });
#else
  return std::nullopt;
#endif
}

}  // namespace c10d_func
