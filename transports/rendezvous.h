#pragma once
// What a transport is given to form a communicator, and how the registry names a transport: the
// rendezvous (a store prefixed for one group, the caller's place in it, the device) and the
// factory that turns one into a Communicator, and the all-gather through the store that forming
// takes. The registry (runtime/group_registry.h) owns the transports; a transport needs only these
// from it.
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

struct Rendezvous;
class Communicator;
using CommunicatorFactory = std::function<std::shared_ptr<Communicator>(const Rendezvous&)>;

// Where a transport meets its peers: a store already prefixed for this key, the caller's index
// in the chunk and its size, and the device the communicator serves.
struct Rendezvous {
  c10::intrusive_ptr<c10d::Store> store;
  int64_t rank = -1;
  int64_t size = 0;
  std::vector<int64_t> members;  // the chunk's global ranks, for messages
  std::string group;             // "tag='x', chunk [0, 1]", for messages
  std::chrono::milliseconds timeout{};
  c10::Device device{c10::DeviceType::CPU};
  // When forming must be done: the timeout from the first call. Successive waits of a formation
  // share it (remaining()), so a formation fails within the timeout, not a multiple of it.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Every collective of this communicator is issued by one thread that waits for each before
  // issuing the next, in the same order on every member (a composite communicator's worker, as
  // the hierarchy's): the transport may run each inside the call, with no hand-off to a thread.
  bool one_ordered_caller = false;

  std::chrono::milliseconds remaining() const {
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      return timeout;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

  // The same rendezvous on the keys under `prefix` (a part of a formation, a sub-transport).
  Rendezvous under(const std::string& prefix) const;
};

// How the members of a group name its device in what they share (store prefixes, the group's
// name in torch's flight recorder): its type alone ("cpu", "cuda"). Each rank serves its own
// device index (cuda:0 on one, cuda:1 on another), so an index in a shared name would part them.
std::string shared_device(c10::Device device);

// The longest value store_all_gather takes from a peer: more is cut (a record of this library is
// far shorter; whatever wrote more is not a member, and the caller's check refuses it).
constexpr size_t kMaxGatheredBytes = 1 << 16;

// Every member's `mine`, in member order (the caller's own included): each member sets
// "<key>/<rank>" and waits for the others' keys until `timeout`. A peer's value is cut at
// `max_bytes`; callers check what they read before use. The one all-gather through the store of
// every formation (host identities, shm's agreements, rail addresses, NCCL's device check, the
// debug fingerprints).
std::vector<std::vector<uint8_t>> store_all_gather(c10d::Store& store, const std::string& key,
                                                   int64_t rank, int64_t size,
                                                   const std::vector<uint8_t>& mine,
                                                   std::chrono::milliseconds timeout,
                                                   size_t max_bytes = kMaxGatheredBytes);
// The same among a rendezvous' members, within its remaining time.
std::vector<std::vector<uint8_t>> store_all_gather(const Rendezvous& rendezvous,
                                                   const std::string& key,
                                                   const std::vector<uint8_t>& mine,
                                                   size_t max_bytes = kMaxGatheredBytes);
// Text values: each member's `mine` as bytes, and back.
std::vector<std::string> store_all_gather_text(const Rendezvous& rendezvous, const std::string& key,
                                               const std::string& mine,
                                               size_t max_bytes = kMaxGatheredBytes);

// A transport of one device type, by name ("gloo", "nccl").
struct Transport {
  std::string name;
  CommunicatorFactory factory;
  // Sub-communicators of a partition that covers the world are made by one split of the world
  // communicator (one call per rank) instead of one rendezvous per chunk.
  bool splits_world = false;
  // Chosen for this very tag (set_transport(name, device, tag=...)): then even a chunk of one
  // member runs on it instead of the local shortcut, e.g. to exercise NCCL on a single GPU.
  bool forced = false;
  // Its own errors name no rank (Gloo's): a chunk's communicator on it is wrapped so that a
  // failed collective names the members that are gone (missing_member_reports.h). CPU only.
  bool needs_roll_call = false;
};

}  // namespace c10d_func
