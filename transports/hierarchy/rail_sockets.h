#pragma once
// The sockets of a rail link: listening on an address, connecting with retries until a
// deadline, moving whole buffers before a deadline, and naming a remote end. Errors read
// "connecting the hosts across a rail: ..." and name the peer.
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

namespace c10d_func::rail {

using Clock = std::chrono::steady_clock;

// strerror's words for `error`.
std::string error_text(int error);
// Sends each write at once (a link's messages are few and latency-bound).
void set_nodelay(int fd);
// Milliseconds left until `deadline`, for poll(): 0 once it has passed.
int milliseconds_until(Clock::time_point deadline);
// Listens on `address` (any port); returns the socket and its port, or -1.
std::pair<int, int> listen_on(const std::string& address);
// Sends or receives all of `bytes` on a blocking socket before `deadline`.
void transfer_all(int fd, void* bytes, size_t length, bool send, Clock::time_point deadline,
                  const std::string& peer);
// A connected socket to `address`:`port`, retried until `deadline`.
int connect_to(const std::string& address, int port, Clock::time_point deadline,
               const std::string& peer);
// "address:port" of a connection's remote end, for messages.
std::string remote_of(const sockaddr_storage& address);

}  // namespace c10d_func::rail
