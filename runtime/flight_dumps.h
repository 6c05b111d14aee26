#pragma once
// When a group fails on one rank, every member dumps torch's flight recorder, as
// ProcessGroupNCCL's heartbeat monitor has every rank dump when one times out: the rank that
// failed sets a key in the group's store, and every process that records watches the stores of
// its groups for it (one thread, polling once a second, on store connections of its own). A rank
// that skipped a collective is then in the dump set too, which torch's analyzer (fr_trace) needs
// to name it.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>

namespace c10d_func {

// Watches `store` (shared by a group's members) for a dump request, where the flight recorder
// records; `global_rank` names this process's dump file. Cheap to call again for a store.
void watch_for_flight_dumps(const c10::intrusive_ptr<c10d::Store>& store, int64_t global_rank);

// Dumps this process's recorder (flight_dump_on_failure) and asks the other members of the
// group that shares `store` (may be null: this process only) to dump theirs.
void dump_flight_recorders_everywhere(const c10::intrusive_ptr<c10d::Store>& store,
                                      int64_t global_rank);

// Forgets every watched store (the groups are shut down): the watcher touches none of them again,
// until a group's store is watched anew. At exit it stops for good. A store's server goes away
// with the job; a poll that found it gone would raise inside a detached thread while the process
// tears down.
void stop_watching_for_flight_dumps();

}  // namespace c10d_func
