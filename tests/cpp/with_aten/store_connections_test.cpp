// Pooled store connections (runtime/store_connections.h), on a real TCPStore server in this
// process: requests keep their PrefixStore layers; sequential requests reuse one connection
// whatever store object they come through; a blocking wait holds a connection of its own while
// another thread's request proceeds; a failed request's connection is closed, not reused; a
// forked process makes connections of its own.
#include "runtime/store_connections.h"

#include "tcp_store_server.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

namespace c10d_func {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}
std::string text(const std::vector<uint8_t>& value) {
  return {value.begin(), value.end()};
}

// Connections to `port` closed by their client within the last minute (TIME_WAIT), from the
// kernel's socket tables: what a process really opened, whatever the library counts.
int closed_connections_to(int port) {
  int count = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const auto colon = remote.rfind(':');
      if (colon != std::string::npos && std::stoi(remote.substr(colon + 1), nullptr, 16) == port &&
          state == "06") {
        ++count;
      }
    }
  }
  return count;
}

TEST(StoreConnections, RequestsKeepThePrefixLayersAndReuseOneConnection) {
  auto root = tcp_store_server();
  auto group = c10::make_intrusive<c10d::PrefixStore>(
      "group", c10::make_intrusive<c10d::PrefixStore>("world", root));
  const int64_t before = store_connections_held();
  for (int i = 0; i < 20; ++i) {
    // A store object per formation, as every communicator and channel takes one.
    auto mine = private_connection(group);
    mine->set("key" + std::to_string(i), bytes("value" + std::to_string(i)));
    EXPECT_EQ(mine->add("counter", 1), i + 1);
  }
  // The same keys as the store it was made from, layers included.
  EXPECT_EQ(text(root->get("world/group/key7")), "value7");
  EXPECT_EQ(text(group->get("key19")), "value19");
  // A pool per store: a client to clone from, and one client for requests made one at a time.
  EXPECT_EQ(store_connections_held() - before, 2);
  // A connection of a connection shares its pool.
  auto twice = private_connection(private_connection(group));
  EXPECT_EQ(text(twice->get("key3")), "value3");
  EXPECT_EQ(store_connections_held() - before, 2);
}

TEST(StoreConnections, ABlockingWaitHoldsUpNoOtherRequest) {
  auto root = tcp_store_server();
  auto waiter = private_connection(root);
  auto setter = private_connection(root);
  const int64_t before = store_connections_held();
  auto waited = std::async(std::launch::async, [&] {
    waiter->wait({"late"}, 10s);
    return text(waiter->get("late"));
  });
  std::this_thread::sleep_for(100ms);  // the wait is in flight on its connection
  // On one shared client this set would queue behind the wait, which waits for it.
  setter->set("late", bytes("arrived"));
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waited.get(), "arrived");
  // Two requests were in flight at once: a client each (the pool had none idle yet).
  EXPECT_EQ(store_connections_held() - before, 2);
}

TEST(StoreConnections, AFailedRequestsConnectionIsClosed) {
  auto root = tcp_store_server();
  auto mine = private_connection(root);
  mine->set("warm", bytes("up"));
  const int64_t before = store_connections_held();
  EXPECT_THROW(mine->wait({"never"}, 50ms), std::exception);
  EXPECT_EQ(store_connections_held(), before - 1);
  // The next request connects afresh and works.
  EXPECT_EQ(text(mine->get("warm")), "up");
  EXPECT_EQ(store_connections_held(), before);
}

TEST(StoreConnections, AForkedProcessMakesConnectionsOfItsOwn) {
  auto root = tcp_store_server();
  auto mine = private_connection(root);
  mine->set("parent", bytes("1"));
  const int64_t before = store_connections_held();
  const int closed_before = closed_connections_to(root->getPort());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The parent's idle client is not used here: the request connects anew, and its client is
    // closed after it rather than kept.
    bool ok = text(mine->get("parent")) == "1";
    ok = ok && store_connections_held() == before;
    ok = ok && closed_connections_to(root->getPort()) == closed_before + 1;
    mine->set("child", bytes("2"));
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(text(mine->get("child")), "2");
  EXPECT_EQ(store_connections_held(), before);
}

}  // namespace
}  // namespace c10d_func
