#pragma once
// GroupObserver: how torch's tools see the collectives and messages of one c10d_func group.
// Each one, from issue to completion, is
//   - an entry in torch's flight recorder (torch_flight_recorder.h), under the group's name and
//     global ranks, with torch's sequence ids, sizes and dtypes, scheduled -> started ->
//     completed; the first failure of the group dumps the recorder, as torch does for NCCL;
//   - an event "<transport>:<op>" in torch.profiler traces where the collective runs (in the
//     call, or on the transport's thread: ProfiledName in transports/communicator.h), and
//     torch's "record_param_comms" event with its comms metadata where it is issued;
//   - counted (collectives, bytes, time busy, last error) for c10d_func.groups().
// With no profiler and no recorder, a collective costs two clock reads and a few atomics here.
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/torch_flight_recorder.h"
#include "transports/communicator.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace c10d {
struct ProcessGroupStatus;
}

namespace c10d_func {

// A group as torch's tools name it; the same on every member.
struct GroupIdentity {
  std::string name;              // torch's group name for a backend's group; else tag and ranks
  std::string description;       // "c10d_func cpu", torch's group_desc
  std::vector<int64_t> members;  // global ranks
  int64_t rank = -1;             // this process's index in members
  // Shared by the members: where a failure asks them all to dump the flight recorder (null:
  // this process dumps alone).
  c10::intrusive_ptr<c10d::Store> store;
};

// What one collective or message is, for the tools.
struct ObservedCall {
  std::string_view transport;  // "shm", "gloo", "nccl", "hierarchy", ...
  std::string_view op;         // torch's spelling: "all_reduce", "send", ...
  at::TensorList inputs;
  at::TensorList outputs;
  int64_t peer = -1;  // a message's group-local peer; -1 for a collective and "recvAnySource"
};

// Made with std::make_shared: a collective still in flight keeps its observer.
class GroupObserver : public std::enable_shared_from_this<GroupObserver> {
 public:
  explicit GroupObserver(GroupIdentity identity);
  ~GroupObserver();

  // One call in flight; ended exactly once, by end().
  struct InFlight {
    std::chrono::steady_clock::time_point started;
    std::optional<FlightEntry> entry;
    int64_t sequence = -1;  // a collective's collective_seq_id, while recorded or profiled
    size_t collective_seq = 0, p2p_seq = 0, op_id = 0;  // torch's ids, likewise
    std::string name;  // "<transport>:<op>", set only while a profiler records
  };

  // `issue` starts the collective and returns its Completion; it runs inside the profiler's
  // "record_param_comms" scope when a profiler records. Every outcome of the call (done at
  // once, done later, failed, thrown) ends what begin opened.
  template <typename Issue>
  Completion observe(const ObservedCall& call, Issue&& issue) {
    InFlight flight = begin(call);
    Completion done;
    try {
      if (!flight.name.empty()) {
        // A profiler records: torch's comms metadata on this thread, and the transport records
        // the collective where it runs, under flight.name.
        auto metadata = comms_metadata(call, flight);
        ProfiledName named(&flight.name);
        done = issue();
      } else {
        done = issue();
      }
    } catch (const std::exception& error) {
      end(flight, error.what());
      throw;
    }
    settle(std::move(flight), done);
    return done;
  }

  Activity activity() const;
  const GroupIdentity& identity() const { return identity_; }
  // The group failed (its members are out of step): the flight recorder is dumped where the env
  // asks for it, once per process.
  void failed(const std::string& reason);
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_.store(timeout.count()); }

 private:
  InFlight begin(const ObservedCall& call);
  void end(InFlight& flight, const std::optional<std::string>& error);
  // Ends `flight` now if `done` already completed, else when it does.
  void settle(InFlight flight, const Completion& done);

  // torch's "record_param_comms" event, open until the returned guard goes.
  std::shared_ptr<void> comms_metadata(const ObservedCall& call, const InFlight& flight);

  GroupIdentity identity_;
  std::tuple<std::string, std::string> flight_name_;
  size_t flight_id_;
  std::shared_ptr<c10d::ProcessGroupStatus> status_;
  std::atomic<int64_t> timeout_ms_{0};

  std::mutex sequence_mutex_;  // entries are recorded in issue order
  size_t collective_seq_ = 0;
  size_t p2p_seq_ = 0;
  size_t op_id_ = 0;

  std::atomic<int64_t> collectives_{0};
  std::atomic<int64_t> bytes_{0};
  mutable std::mutex busy_mutex_;
  int64_t in_flight_ = 0;
  std::chrono::steady_clock::time_point busy_since_;
  std::chrono::steady_clock::duration busy_{};
  std::optional<std::string> last_error_;
};

}  // namespace c10d_func
