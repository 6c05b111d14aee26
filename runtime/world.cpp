// World discovery from the environment; see world.h.
#include "runtime/world.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <exception>
#include <future>
#include <string>
#include <thread>

namespace c10d_func {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

int64_t env_int(const char* name, const std::string& value) {
  try {
    size_t used = 0;
    const int64_t parsed = std::stoll(value, &used);
    TORCH_CHECK(used == value.size(), "trailing characters");
    return parsed;
  } catch (const std::exception&) {
    TORCH_CHECK(false, "c10d_func: environment variable ", name, "='", value,
                "' is not an integer");
  }
}

}  // namespace

std::chrono::milliseconds collective_timeout() {
  constexpr double kDefaultSeconds = 300.0;
  auto value = env("C10D_FUNC_TIMEOUT");
  double seconds = kDefaultSeconds;
  if (value) {
    try {
      seconds = std::stod(*value);
    } catch (const std::exception&) {
      TORCH_CHECK(false, "c10d_func: C10D_FUNC_TIMEOUT='", *value, "' is not a number of seconds");
    }
    TORCH_CHECK(seconds > 0, "c10d_func: C10D_FUNC_TIMEOUT must be positive, got ", *value);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

namespace {

// TCPStore's client retries a connection that timed out after a randomized delay, so a store
// that never comes up (rank 0 failed before its first collective) would be reported after up to
// twice the timeout. The connection is made on a helper thread that is given exactly the
// timeout; one that succeeds later is let go.
c10::intrusive_ptr<c10d::TCPStore> connect_within(const std::string& addr,
                                                  const c10d::TCPStoreOptions& options) {
  // The promise outlives a wait that gave up: the helper thread keeps it until it is done.
  auto promise = std::make_shared<std::promise<c10::intrusive_ptr<c10d::TCPStore>>>();
  std::future<c10::intrusive_ptr<c10d::TCPStore>> connected = promise->get_future();
  std::thread([promise, addr, options] {
    try {
      promise->set_value(c10::make_intrusive<c10d::TCPStore>(addr, options));
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
  if (connected.wait_for(options.timeout) != std::future_status::ready) {
    throw std::runtime_error("no connection within the timeout");
  }
  return connected.get();
}

}  // namespace

std::optional<World> world_from_env(std::string_view op) {
  auto addr = env("MASTER_ADDR");
  auto port = env("MASTER_PORT");
  auto rank = env("RANK");
  auto size = env("WORLD_SIZE");
  if (!addr || !port || !rank || !size) {
    return std::nullopt;
  }
  World world;
  world.rank = env_int("RANK", *rank);
  world.size = env_int("WORLD_SIZE", *size);
  TORCH_CHECK(world.size > 0, "c10d_func: WORLD_SIZE must be positive, got ", world.size);
  TORCH_CHECK(world.rank >= 0 && world.rank < world.size, "c10d_func: RANK=", world.rank,
              " is out of range for WORLD_SIZE=", world.size);
  const int64_t port_number = env_int("MASTER_PORT", *port);
  TORCH_CHECK(port_number > 0 && port_number < 65536, "c10d_func: MASTER_PORT=", port_number,
              " is not a TCP port");
  const bool agent_hosts_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";

  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port_number);
  options.isServer = world.rank == 0 && !agent_hosts_store;
  options.numWorkers = static_cast<std::size_t>(world.size);
  options.waitWorkers = false;
  options.timeout = collective_timeout();
  // Multi-tenant, as torch's own env:// rendezvous is, so a later init_process_group on the
  // same MASTER_PORT in this process shares the server instead of failing to bind.
  options.multiTenant = true;
  try {
    world.store = connect_within(*addr, options);
  } catch (const std::exception& error) {
    const std::string host = agent_hosts_store ? "torchelastic's agent" : "rank 0";
    TORCH_CHECK(false, "c10d_func.", op, ": could not reach the world's store at ", *addr, ":",
                port_number, " (env://), hosted by ", host, ", within C10D_FUNC_TIMEOUT (",
                options.timeout.count() / 1000.0, " s): ",
                agent_hosts_store ? "the agent is gone"
                                  : "rank 0 never made its first collective call (it may have "
                                    "failed or exited before it)",
                ". Store error: ", error.what());
  }
  world.origin = "env://";
  return world;
}

}  // namespace c10d_func
