#pragma once
// The world every group is resolved against: a store shared by all processes, this process's
// global rank and the world size. It comes from, in order: an explicit c10d_func.init(...); an
// initialised torch.distributed default group (asked through a provider the Python package
// installs); or the env:// variables MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace c10d_func {

struct World {
  c10::intrusive_ptr<c10d::Store> store;
  int64_t rank = -1;
  int64_t size = 0;
  std::string origin; // "init", "default process group", "env://"
};

// C10D_FUNC_TIMEOUT (seconds, may be fractional), read at each use; 300 s when unset.
std::chrono::milliseconds collective_timeout();

// A world from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, or nullopt when any is missing. Rank 0
// hosts the TCPStore unless torchelastic's agent already does (TORCHELASTIC_USE_AGENT_STORE).
std::optional<World> world_from_env();

} // namespace c10d_func
