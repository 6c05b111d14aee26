#pragma once
// The group-resolution registry: (device type, tag, chunk) -> a live Communicator.
//
// A communicator is created on first use by a rendezvous among the chunk's members only, through
// a store prefix unique to its key, so groups appear lazily, in any order, with no world-wide
// call; later calls with the same key find the same communicator. Creation of different keys
// proceeds in parallel (one lock per key). register_group binds an existing backend to a key.
// A chunk of one member needs no transport: its collectives are local copies.
#include <c10/core/DeviceType.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "runtime/group_spec.h"
#include "runtime/observed_communicator.h"
#include "runtime/resolved_group.h"
#include "runtime/world.h"
#include "transports/communicator.h"
#include "transports/rendezvous.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace c10d_func {

using WorldProvider = std::function<std::optional<World>()>;

// Binds torch's ProcessGroup for a group that has no communicator yet, when one is meant to serve
// it: the group named by a `ptd:<name>` tag, or, in a delegated world, the group of those ranks.
// Returns whether it bound one (through register_communicator, for the caller's chunk).
using GroupBinder =
    std::function<bool(std::string_view op, c10::Device device, const std::string& tag,
                       const std::vector<int64_t>& ranks, int64_t group_size, bool delegated)>;

struct GroupInfo {
  std::string device;
  std::string tag;
  std::vector<int64_t> members;
  int64_t rank = -1;  // caller's index in members
  std::string backend;
  std::string origin;  // "created", "split" or "registered"
  std::optional<std::string> failure;
  std::vector<std::pair<std::string, int64_t>> memory;  // the transport's memory counters
  std::optional<Activity> activity;                     // what it has done (group_observer.h)
};

// How torch's tools name the chunk's group on `device` under `tag` (the same on every member,
// whatever device index each serves): "c10d_func/cpu/<tag>/[0, 1]".
GroupIdentity chunk_identity(c10::Device device, const std::string& tag, const Chunk& chunk);

// The store prefix under which the chunk's members make their `formation`-th attempt to form a
// communicator of `transport` (the same on every member, whatever device index each serves).
std::string rendezvous_prefix(c10::Device device, const std::string& transport,
                              const std::string& tag, const Chunk& chunk, int64_t formation);

// Forms a communicator of `transport` among the members of `rendezvous` (its store already
// prefixed for this group). The members first meet under `meeting` (by default "meeting/" in the
// rendezvous' store, which must then be the same whatever transport a member chose) and compare
// their transport, the order they listed the members in and whether they run the DETAIL checks:
// where they differ, every member fails at once naming each one's choices, instead of each
// waiting under a rendezvous of its own until the timeout. Each member then announces itself, so
// a rendezvous that fails names the members that never arrived, with `op` and `rendezvous.group`.
std::shared_ptr<Communicator> form_communicator(std::string_view op, const Transport& transport,
                                                const Rendezvous& rendezvous,
                                                c10::intrusive_ptr<c10d::Store> meeting = {});

class GroupRegistry {
 public:
  struct Impl;  // one world's registry state (see impl())
  static GroupRegistry& instance();

  void set_world(World world);
  void set_world_provider(WorldProvider provider);
  void set_group_binder(GroupBinder binder);
  // torch.distributed's default group changed (init_process_group / destroy_process_group) in
  // the calling thread. A per-thread world gets a fresh scope of its own for this thread;
  // otherwise the process's world is forgotten (an explicit init() world stays) and, when the
  // default group is gone, its communicators are waited for and dropped.
  void world_changed(bool per_thread, bool initialised);
  // Adds (or replaces) a transport for `device`.
  void add_transport(c10::DeviceType device, Transport transport);
  // Which transport serves `device` for `tag` ("" = every tag without a choice of its own).
  // Without a choice: C10D_FUNC_<DEVICE>_TRANSPORT (e.g. C10D_FUNC_CUDA_TRANSPORT=gloo), else
  // nccl for CUDA and auto for CPU (shm on one host, shm+gloo across hosts). A chunk of one
  // member is local unless its tag has a choice of its own. Raises for a name `device` has no
  // transport of, and for a tag whose groups already formed on another transport (they keep
  // theirs: a choice is for groups not formed yet).
  void select_transport(c10::DeviceType device, const std::string& tag, const std::string& name);

  // The world, resolved on first use; raises naming `op` when there is none.
  World world(std::string_view op);
  // The world if one is already resolved (no discovery).
  std::optional<World> current_world();

  // The caller's chunk of (tag, ranks, group_size) and its communicator for tensors on
  // `device`. The first call of a group validates it against the world and forms the
  // communicator; later calls find it in a cache behind a shared lock.
  std::shared_ptr<const ResolvedGroup> resolve(std::string_view op, c10::Device device,
                                               std::string_view tag, c10::ArrayRef<int64_t> ranks,
                                               int64_t group_size);

  void register_communicator(c10::DeviceType device, const std::string& tag,
                             std::vector<int64_t> members,
                             std::shared_ptr<Communicator> communicator);

  std::vector<GroupInfo> groups();

  // Drops every key served by one of `communicators` (a destroyed group's: under its own tag
  // and any other it was bound to); collectives issued on them keep them until they finish.
  void forget(const std::vector<std::shared_ptr<Communicator>>& communicators);
  // Drops the ProcessGroup bound to (`tag`, `members`) on every device (torch destroyed it);
  // communicators c10d_func formed itself under that tag stay.
  void unbind(const std::string& tag, const std::vector<int64_t>& members);

  // Waits for pending collectives, then forgets every communicator (the world stays resolved;
  // init() may replace it). The next call of a key creates a fresh communicator.
  void shutdown();

 private:
  GroupRegistry() = default;
  // The registry state of the calling thread's world: the process's, or the thread's own when
  // ranks are threads. Configuration (transports, choices, provider, binder) is copied into a
  // thread's scope when it is made.
  Impl& impl();
  void enter_thread_scope();
  void leave_thread_scope();
  // Raises if a group of `device` and `tag` already formed on another transport than `name`;
  // registry lock held.
  void refuse_changing_formed_tag_locked(c10::DeviceType device, const std::string& tag,
                                         const std::string& name);
  // The transport `name` of `device`, with the registry lock held.
  Transport find_transport_locked(std::string_view op, c10::DeviceType device,
                                  const std::string& name, const std::string& tag);
  // Drops the formed slots `dropping` picks (by tag, members, origin and communicator) on every
  // device, and clears the resolve cache.
  using SlotFilter =
      std::function<bool(const std::string& tag, const std::vector<int64_t>& members,
                         const std::string& origin, const std::shared_ptr<Communicator>&)>;
  void drop_slots(const SlotFilter& dropping);
  std::shared_ptr<Communicator> registered(c10::Device device, const std::string& tag,
                                           const Chunk& chunk);
  std::shared_ptr<Communicator> communicator(std::string_view op, c10::Device device,
                                             const GroupSpec& spec, const Chunk& chunk);

 public:
  // The transport serving `device` for `tag` (see select_transport); raises, naming `op`, when
  // the chosen one does not exist.
  Transport transport_for(std::string_view op, c10::DeviceType device, const std::string& tag);
  // The transport `name` of `device`; raises, naming `op`, when there is none.
  Transport find_transport(std::string_view op, c10::DeviceType device, const std::string& name);

 private:
  std::shared_ptr<Communicator> chunk_communicator(std::string_view op, c10::Device device,
                                                   const std::string& tag, const Chunk& chunk,
                                                   const Transport& transport);
  void split_world(std::string_view op, c10::Device device, const GroupSpec& spec,
                   const Chunk& chunk, const Transport& transport, const World& world);
};

}  // namespace c10d_func
