// The Gloo transport; see gloo_transport.h.
#include "transports/gloo/gloo_transport.h"

#include "transports/c10d/group_communicator.h"

#ifdef C10D_FUNC_WITH_GLOO_HEADERS
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#endif

namespace c10d_func {

#ifdef C10D_FUNC_WITH_GLOO_HEADERS
namespace {

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) != 0;
  }
  return false;
}

// Whether this host's name resolves to an address other than loopback: then torch's default
// device (bound to that address) is reachable from other hosts.
bool hostname_resolves_beyond_loopback() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) {
    return false;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host, nullptr, &hints, &found) != 0) {
    return false;
  }
  bool beyond = false;
  for (addrinfo* it = found; it != nullptr && !beyond; it = it->ai_next) {
    beyond = !is_loopback(it->ai_addr);
  }
  ::freeaddrinfo(found);
  return beyond;
}

// The address this host sends from to reach `peer` (the interface its route takes), found with
// a connected UDP socket, which sends nothing; nothing for a peer reached over loopback.
std::optional<std::string> address_towards(const std::string& peer) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(peer.c_str(), "9", &hints, &found) != 0) {
    return std::nullopt;
  }
  std::optional<std::string> address;
  for (addrinfo* it = found; it != nullptr && !address; it = it->ai_next) {
    const int fd = ::socket(it->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, it->ai_addr, it->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        !is_loopback(reinterpret_cast<sockaddr*>(&local))) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) {
        address = text;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return address;
}

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
  if (!hostname_resolves_beyond_loopback() && store_host != nullptr && *store_host != '\0') {
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
