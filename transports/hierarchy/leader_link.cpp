// See leader_link.h.
#include "transports/hierarchy/leader_link.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "transports/net/host_address.h"
#include "transports/shm/shm_reduce.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

namespace c10d_func {
namespace {

using Clock = std::chrono::steady_clock;

struct Header {
  uint64_t collective;
  uint64_t bytes;
};

std::string error_text(int error) {
  return std::string(std::strerror(error));
}

std::string leader_key(int64_t position) {
  return "leader_link/" + std::to_string(position);
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(left.count(), 0));
}

// Listens on `address` (any port); returns the socket and its port, or -1.
std::pair<int, int> listen_on(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), "0", &hints, &found) != 0) {
    return {-1, 0};
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

// Sends or receives all of `bytes` on a blocking socket before `deadline`.
void transfer_all(int fd, void* bytes, size_t length, bool send, Clock::time_point deadline,
                  const std::string& peer) {
  char* at = static_cast<char*>(bytes);
  while (length > 0) {
    pollfd ready{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    const int polled = ::poll(&ready, 1, milliseconds_until(deadline));
    TORCH_CHECK(polled > 0, "c10d_func: connecting the hosts' leaders: ", peer,
                " did not answer within C10D_FUNC_TIMEOUT");
    const ssize_t moved = send ? ::send(fd, at, length, MSG_NOSIGNAL) : ::recv(fd, at, length, 0);
    TORCH_CHECK(moved > 0 || (moved < 0 && errno == EINTR),
                "c10d_func: connecting the hosts' leaders: ", peer,
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
              "c10d_func: connecting the hosts' leaders: bad address ", address, " of ", peer);
  std::string why;
  while (true) {
    const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    why = error_text(errno);
    if (fd >= 0) {
      ::close(fd);
    }
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(found);
      TORCH_CHECK(false, "c10d_func: connecting the hosts' leaders: cannot reach ", peer, " at ",
                  address, ":", port, " within C10D_FUNC_TIMEOUT: ", why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

std::unique_ptr<LeaderLink> LeaderLink::connect(const Rendezvous& rendezvous) {
  const int64_t me = rendezvous.rank;
  const auto deadline = Clock::now() + rendezvous.remaining();
  const auto name = [&](int64_t position) {
    return "rank " + std::to_string(rendezvous.members.at(position)) + " (a host's first rank)";
  };
  const std::optional<std::string> address = address_for_peers();
  auto [listener, port] = address ? listen_on(*address) : std::pair<int, int>{-1, 0};
  const std::string mine = listener < 0 ? "none" : *address + " " + std::to_string(port);
  rendezvous.store->set(leader_key(me), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> where(rendezvous.size);
  bool everyone_listens = true;
  for (int64_t p = 0; p < rendezvous.size; ++p) {
    rendezvous.store->wait({leader_key(p)}, rendezvous.remaining());
    const auto value = rendezvous.store->get(leader_key(p));
    where[p] = std::string(value.begin(), value.end());
    everyone_listens = everyone_listens && where[p] != "none";
  }
  if (!everyone_listens) {
    if (listener >= 0) {
      ::close(listener);
    }
    return nullptr;
  }
  std::vector<int> sockets(rendezvous.size, -1);
  try {
    // Lower positions accept, higher ones connect and introduce themselves.
    for (int64_t p = 0; p < me; ++p) {
      std::istringstream parts(where[p]);
      std::string host;
      int their_port = 0;
      parts >> host >> their_port;
      sockets[p] = connect_to(host, their_port, deadline, name(p));
      int64_t position = me;
      transfer_all(sockets[p], &position, sizeof(position), /*send=*/true, deadline, name(p));
    }
    for (int64_t accepted = me + 1; accepted < rendezvous.size; ++accepted) {
      pollfd ready{listener, POLLIN, 0};
      TORCH_CHECK(::poll(&ready, 1, milliseconds_until(deadline)) > 0,
                  "c10d_func: connecting the hosts' leaders: a host's first rank of ",
                  rendezvous.group, " did not connect within C10D_FUNC_TIMEOUT");
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      TORCH_CHECK(fd >= 0, "c10d_func: connecting the hosts' leaders: ", error_text(errno));
      int64_t position = -1;
      transfer_all(fd, &position, sizeof(position), /*send=*/false, deadline, "a peer");
      TORCH_CHECK(position > me && position < rendezvous.size && sockets[position] < 0,
                  "c10d_func: connecting the hosts' leaders: unexpected peer ", position);
      sockets[position] = fd;
    }
  } catch (...) {
    ::close(listener);
    for (const int fd : sockets) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    throw;
  }
  ::close(listener);
  for (const int fd : sockets) {
    if (fd >= 0) {
      set_nodelay(fd);
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  return std::unique_ptr<LeaderLink>(new LeaderLink(rendezvous, std::move(sockets)));
}

LeaderLink::LeaderLink(const Rendezvous& rendezvous, std::vector<int> sockets)
    : position_(rendezvous.rank),
      members_(rendezvous.members),
      sockets_(std::move(sockets)),
      timeout_(rendezvous.timeout) {}

LeaderLink::~LeaderLink() {
  for (const int fd : sockets_) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
}

void LeaderLink::all_reduce(const at::Tensor& buffer, ReduceOp op) {
  const size_t bytes = static_cast<size_t>(buffer.numel()) * buffer.element_size();
  const int64_t leaders = static_cast<int64_t>(sockets_.size());
  const Header header{++collectives_, bytes};
  // What goes to every peer: the header, then the buffer.
  std::vector<char> message(sizeof(Header) + bytes);
  std::memcpy(message.data(), &header, sizeof(Header));
  std::memcpy(message.data() + sizeof(Header), buffer.data_ptr(), bytes);
  // What comes from each peer, and how much of it has come or gone.
  std::vector<std::vector<char>> received(leaders);
  std::vector<size_t> sent(leaders, 0), got(leaders, 0);
  int64_t open = 0;
  for (int64_t p = 0; p < leaders; ++p) {
    if (p != position_) {
      received[p].resize(sizeof(Header) + bytes);
      open += 2;  // a send and a receive
    }
  }
  const auto name = [&](int64_t p) {
    return "rank " + std::to_string(members_[p]) + " (its host's first rank)";
  };
  const auto deadline = Clock::now() + timeout_;
  std::vector<pollfd> ready;
  std::vector<int64_t> peer_of;
  while (open > 0) {
    ready.clear();
    peer_of.clear();
    for (int64_t p = 0; p < leaders; ++p) {
      if (p == position_) {
        continue;
      }
      short events = 0;
      if (sent[p] < message.size()) {
        events |= POLLOUT;
      }
      if (got[p] < received[p].size()) {
        events |= POLLIN;
      }
      if (events != 0) {
        ready.push_back({sockets_[p], events, 0});
        peer_of.push_back(p);
      }
    }
    const int polled = ::poll(ready.data(), ready.size(), milliseconds_until(deadline));
    if (polled < 0 && errno == EINTR) {
      continue;
    }
    if (polled == 0) {
      std::vector<std::string> silent;
      for (size_t i = 0; i < peer_of.size(); ++i) {
        silent.push_back(name(peer_of[i]));
      }
      std::ostringstream who;
      for (size_t i = 0; i < silent.size(); ++i) {
        who << (i ? ", " : "") << silent[i];
      }
      TORCH_CHECK(false, "between hosts (the leaders' link): ", who.str(),
                  " did not take part in the collective within C10D_FUNC_TIMEOUT (",
                  static_cast<double>(timeout_.count()) / 1000.0, " s)");
    }
    for (size_t i = 0; i < ready.size(); ++i) {
      const int64_t p = peer_of[i];
      const int fd = sockets_[p];
      if ((ready[i].revents & POLLOUT) != 0) {
        const ssize_t moved =
            ::send(fd, message.data() + sent[p], message.size() - sent[p], MSG_NOSIGNAL);
        TORCH_CHECK(moved >= 0 || errno == EAGAIN || errno == EINTR,
                    "between hosts (the leaders' link): sending to ", name(p), " failed (",
                    error_text(errno), "): it exited or its host is unreachable");
        if (moved > 0 && (sent[p] += static_cast<size_t>(moved)) == message.size()) {
          --open;
        }
      }
      if ((ready[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && got[p] < received[p].size()) {
        const ssize_t moved =
            ::recv(fd, received[p].data() + got[p], received[p].size() - got[p], 0);
        TORCH_CHECK(moved != 0, "between hosts (the leaders' link): ", name(p),
                    " closed the connection (it exited)");
        TORCH_CHECK(moved > 0 || errno == EAGAIN || errno == EINTR,
                    "between hosts (the leaders' link): receiving from ", name(p), " failed (",
                    error_text(errno), "): it exited or its host is unreachable");
        if (moved > 0) {
          const size_t before = got[p];
          got[p] += static_cast<size_t>(moved);
          if (before < sizeof(Header) && got[p] >= sizeof(Header)) {
            Header theirs{};
            std::memcpy(&theirs, received[p].data(), sizeof(Header));
            TORCH_CHECK(theirs.collective == header.collective && theirs.bytes == header.bytes,
                        "between hosts (the leaders' link): ", name(p), " is in collective #",
                        theirs.collective, " of ", theirs.bytes, " bytes, ", name(position_),
                        " in #", header.collective, " of ", header.bytes,
                        " bytes: the hosts called collectives in another order or with "
                        "other sizes");
          }
          if (got[p] == received[p].size()) {
            --open;
          }
        }
      }
    }
  }
  // Every leader reduces the same buffers in the same (host) order, into a fresh tensor.
  std::vector<const char*> sources(leaders);
  for (int64_t p = 0; p < leaders; ++p) {
    sources[p] = p == position_ ? static_cast<const char*>(buffer.data_ptr())
                                : received[p].data() + sizeof(Header);
  }
  at::Tensor result = at::empty_like(buffer);
  shm::reduce_into(result.data_ptr(), std::move(sources), buffer.numel(), buffer.scalar_type(), op);
  buffer.copy_(result);
}

}  // namespace c10d_func
