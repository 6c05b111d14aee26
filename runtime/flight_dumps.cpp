// See flight_dumps.h.
#include "runtime/flight_dumps.h"

#include <c10/util/Logging.h>

#include "runtime/store_connections.h"
#include "runtime/torch_flight_recorder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace c10d_func {
namespace {

constexpr const char* kDumpRequest = "c10d_func/flight_recorder/dump_request";
constexpr auto kPollInterval = std::chrono::seconds(1);

struct Watched {
  std::mutex mutex;
  std::set<const c10d::Store*> seen;
  std::vector<c10::intrusive_ptr<c10d::Store>> connections;  // private ones, polled
  int64_t rank = -1;
  bool started = false;
  std::atomic<bool> stopped{false};
};

Watched& watched() {
  static auto* instance = new Watched();  // never destroyed: the watcher may outlive exit
  return *instance;
}

void watch() {
  while (!watched().stopped.load()) {
    std::vector<c10::intrusive_ptr<c10d::Store>> stores;
    int64_t rank = -1;
    {
      std::lock_guard<std::mutex> lock(watched().mutex);
      stores = watched().connections;
      rank = watched().rank;
    }
    for (auto& store : stores) {
      if (watched().stopped.load()) {
        return;
      }
      bool asked = false;
      try {
        asked = store->check({kDumpRequest});
      } catch (...) {
        // That group's store is gone (its job or group is ending): it is watched no more.
        std::lock_guard<std::mutex> lock(watched().mutex);
        auto& connections = watched().connections;
        connections.erase(std::remove(connections.begin(), connections.end(), store),
                          connections.end());
      }
      if (asked) {
        LOG(INFO) << "c10d_func: rank " << rank
                  << " dumps its flight recorder: a member of one of its groups failed";
        flight_dump_on_failure(rank);
        return;
      }
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

void stop_for_good() {
  watched().stopped.store(true);
  stop_watching_for_flight_dumps();
}

}  // namespace

void watch_for_flight_dumps(const c10::intrusive_ptr<c10d::Store>& store, int64_t global_rank) {
  if (!store || !flight_recorder_enabled()) {
    return;
  }
  auto& state = watched();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.stopped.load() || !state.seen.insert(store.get()).second) {
    return;
  }
  try {
    state.connections.push_back(private_connection(store));
  } catch (const std::exception& error) {
    LOG(WARNING) << "c10d_func: cannot watch a group's store for flight recorder dumps: "
                 << error.what();
    return;
  }
  state.rank = global_rank;
  if (!state.started) {
    state.started = true;
    std::atexit(stop_for_good);  // runs before exit's teardown
    std::thread(watch).detach();
  }
}

void stop_watching_for_flight_dumps() {
  auto& state = watched();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.connections.clear();
  state.seen.clear();
}

void dump_flight_recorders_everywhere(const c10::intrusive_ptr<c10d::Store>& store,
                                      int64_t global_rank) {
  if (!flight_recorder_enabled()) {
    return;
  }
  flight_dump_on_failure(global_rank);
  if (store) {
    try {
      private_connection(store)->set(kDumpRequest, std::vector<uint8_t>{1});
    } catch (const std::exception& error) {
      LOG(WARNING) << "c10d_func: could not ask the other members to dump: " << error.what();
    }
  }
}

}  // namespace c10d_func
