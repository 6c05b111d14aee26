// The sockets of a rail link; see rail_sockets.h.
#include "transports/hierarchy/rail_sockets.h"

#include <c10/util/Exception.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace c10d_func::rail {

std::string error_text(int error) {
  return std::string(std::strerror(error));
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

namespace {

// connect() bounded by `deadline` (a blocking one waits out the kernel's SYN retries, about two
// minutes against a host that drops packets); leaves the socket blocking. False with errno set.
bool connect_until(int fd, const addrinfo& where, Clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int error = ::connect(fd, where.ai_addr, where.ai_addrlen) == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    pollfd ready{fd, POLLOUT, 0};
    int polled = 0;
    while ((polled = ::poll(&ready, 1, milliseconds_until(deadline))) < 0 && errno == EINTR) {
    }
    socklen_t length = sizeof(error);
    if (polled == 1) {
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    } else {
      error = polled == 0 ? ETIMEDOUT : errno;
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  errno = error;
  return error == 0;
}

}  // namespace

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(left.count(), 0));
}

std::pair<int, int> listen_on(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), "0", &hints, &found) != 0) {
    return {-1, 0};
  }
  // Non-blocking: a connection gone between poll and accept (accept(2) documents it) makes
  // accept answer EAGAIN instead of waiting for the next one past the formation's deadline.
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd >= 0 && (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 64) != 0)) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    return {-1, 0};
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int port = bound.ss_family == AF_INET
                       ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                       : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return {fd, port};
}

void transfer_all(int fd, void* bytes, size_t length, bool send, Clock::time_point deadline,
                  const std::string& peer) {
  char* at = static_cast<char*>(bytes);
  while (length > 0) {
    pollfd ready{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    const int polled = ::poll(&ready, 1, milliseconds_until(deadline));
    TORCH_CHECK(polled > 0, "c10d_func: connecting the hosts across a rail: ", peer,
                " did not answer within C10D_FUNC_TIMEOUT");
    const ssize_t moved = send ? ::send(fd, at, length, MSG_NOSIGNAL) : ::recv(fd, at, length, 0);
    TORCH_CHECK(moved > 0 || (moved < 0 && errno == EINTR),
                "c10d_func: connecting the hosts across a rail: ", peer,
                moved == 0 ? " closed the connection" : ": " + error_text(errno));
    if (moved > 0) {
      at += moved;
      length -= static_cast<size_t>(moved);
    }
  }
}

int connect_to(const std::string& address, int port, Clock::time_point deadline,
               const std::string& peer) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  TORCH_CHECK(::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) == 0,
              "c10d_func: connecting the hosts across a rail: bad address ", address, " of ", peer);
  std::string why;
  while (true) {
    const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect_until(fd, *found, deadline)) {
      ::freeaddrinfo(found);
      return fd;
    }
    why = error_text(errno);
    if (fd >= 0) {
      ::close(fd);
    }
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(found);
      TORCH_CHECK(false, "c10d_func: connecting the hosts across a rail: cannot reach ", peer,
                  " at ", address, ":", port, " within C10D_FUNC_TIMEOUT: ", why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string remote_of(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    port = ntohs(v6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace c10d_func::rail
