// See host_address.h.
#include "transports/host_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace c10d_func {
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

std::optional<std::string> text_of(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw =
      address->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  if (::inet_ntop(address->sa_family, raw, text, sizeof(text)) == nullptr) {
    return std::nullopt;
  }
  return std::string(text);
}

}  // namespace

std::optional<std::string> hostname_address() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) {
    return std::nullopt;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host, nullptr, &hints, &found) != 0) {
    return std::nullopt;
  }
  std::optional<std::string> address;
  for (addrinfo* it = found; it != nullptr && !address; it = it->ai_next) {
    if (!is_loopback(it->ai_addr)) {
      address = text_of(it->ai_addr);
    }
  }
  ::freeaddrinfo(found);
  return address;
}

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
      address = text_of(reinterpret_cast<sockaddr*>(&local));
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return address;
}

std::optional<std::string> interface_address(const std::string& name) {
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    return std::nullopt;
  }
  std::optional<std::string> address;
  for (ifaddrs* it = interfaces; it != nullptr && !address; it = it->ifa_next) {
    if (it->ifa_addr != nullptr && it->ifa_addr->sa_family == AF_INET && name == it->ifa_name) {
      address = text_of(it->ifa_addr);
    }
  }
  ::freeifaddrs(interfaces);
  return address;
}

std::optional<std::string> address_for_peers() {
  const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME");
  if (interfaces != nullptr && *interfaces != '\0') {
    std::stringstream names(interfaces);
    std::string first;
    std::getline(names, first, ',');
    return interface_address(first);
  }
  if (auto address = hostname_address()) {
    return address;
  }
  const char* store_host = std::getenv("MASTER_ADDR");
  if (store_host != nullptr && *store_host != '\0') {
    return address_towards(store_host);
  }
  return std::nullopt;
}

}  // namespace c10d_func
