#pragma once
// The world every group is resolved against: a store shared by all processes, this process's
// global rank and the world size. It comes from, in order: an explicit c10d_func.init(...); an
// initialised torch.distributed default group (asked through a provider the Python package
// installs); or the env:// variables MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace c10d_func {

struct World {
  c10::intrusive_ptr<c10d::Store> store;
  int64_t rank = -1;
  int64_t size = 0;
  std::string origin;  // "init", "default process group", "env://"
  // The world's groups are torch's own and c10d_func must not rendezvous beside them: ranks that
  // are threads of one process, a fake world, a default group implemented in Python. Every group
  // then runs on the torch ProcessGroup of its ranks, as torch's functional collectives do.
  bool delegated = false;
  // Each thread of the process is a rank of its own world (torch's threaded test harness).
  bool per_thread = false;
};

// C10D_FUNC_TIMEOUT (seconds, may be fractional), read at each use; 300 s when unset.
std::chrono::milliseconds collective_timeout();

// A world from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, or nullopt when any is missing. Rank 0
// hosts the TCPStore unless torchelastic's agent already does (TORCHELASTIC_USE_AGENT_STORE).
// `op` names the call in errors: a store that cannot be reached names the rank that hosts it.
std::optional<World> world_from_env(std::string_view op);

}  // namespace c10d_func
