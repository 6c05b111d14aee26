// The Gloo transport; see gloo_transport.h.
#include "transports/gloo/gloo_transport.h"

#include "transports/c10d/group_communicator.h"

#ifdef C10D_FUNC_WITH_GLOO_HEADERS
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <sstream>
#include <string>
#endif

namespace c10d_func {

Transport gloo_transport(GlooMaker make) {
  Transport transport;
  transport.name = "gloo";
  transport.factory = [make = std::move(make)](const Rendezvous& rendezvous) {
    return make_backend_communicator(make(rendezvous));
  };
  return transport;
}

std::optional<GlooMaker> native_gloo_maker() {
#ifdef C10D_FUNC_WITH_GLOO_HEADERS
  return GlooMaker([](const Rendezvous& rendezvous) -> c10::intrusive_ptr<c10d::Backend> {
    // As dist.ProcessGroupGloo(store, rank, size, timeout) makes it: a device per interface
    // of GLOO_SOCKET_IFNAME (comma-separated), else one on this host's address; two threads
    // per device.
    auto options = c10d::ProcessGroupGloo::Options::create(rendezvous.timeout);
    const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME");
    if (interfaces != nullptr && *interfaces != '\0') {
      std::stringstream names(interfaces);
      for (std::string name; std::getline(names, name, ',');) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      }
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
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
