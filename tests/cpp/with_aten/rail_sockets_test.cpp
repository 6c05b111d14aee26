// The rail link's sockets (transports/hierarchy/rail_sockets.h) keep the formation's deadline:
// a connection to a listener that drops SYNs (its accept queue full, as a host that drops
// packets does) gives up at the deadline, not after the kernel's SYN retries (about two
// minutes); and a listener whose pending connection is gone answers accept at once.
#include "transports/hierarchy/rail_sockets.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace c10d_func::rail {
namespace {

using namespace std::chrono_literals;

// A socket connecting to 127.0.0.1:`port` without waiting for the answer.
int connect_without_waiting(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(static_cast<uint16_t>(port));
  where.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&where), sizeof(where));
  return fd;
}

TEST(RailSockets, ConnectingGivesUpAtTheDeadlineWhenSynsAreDropped) {
  auto [listener, port] = listen_on("127.0.0.1");
  ASSERT_GE(listener, 0);
  ASSERT_EQ(::listen(listener, 0), 0);  // a queue of one: later SYNs are dropped, not refused
  std::vector<int> queued;
  for (int i = 0; i < 4; ++i) {
    queued.push_back(connect_without_waiting(port));
  }
  std::this_thread::sleep_for(100ms);  // the first ones fill the queue
  const auto start = Clock::now();
  EXPECT_THROW(connect_to("127.0.0.1", port, start + 300ms, "a test peer"), c10::Error);
  const auto took = Clock::now() - start;
  EXPECT_LT(took, 3s) << "connect_to waited out the kernel's SYN retries";
  for (const int fd : queued) {
    ::close(fd);
  }
  ::close(listener);
}

TEST(RailSockets, AListenerAnswersAcceptAtOnceWithNothingPending) {
  auto [listener, port] = listen_on("127.0.0.1");
  ASSERT_GE(listener, 0);
  ASSERT_GT(port, 0);
  // poll may have said a connection was there that is gone by accept (accept(2)): accept must
  // not then wait for the next one past the formation's deadline.
  EXPECT_NE(::fcntl(listener, F_GETFL) & O_NONBLOCK, 0);
  EXPECT_LT(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC), 0);
  EXPECT_EQ(errno, EAGAIN);
  ::close(listener);
}

}  // namespace
}  // namespace c10d_func::rail
