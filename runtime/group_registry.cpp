// The group-resolution registry: the world, the thread scopes of per-thread worlds, resolution
// of a call's group (cached) and introspection; forming communicators is in
// group_formation.cpp, choosing transports in transport_choice.cpp. See group_registry.h.
#include "runtime/group_registry.h"

#include <c10/util/Exception.h>

#include "runtime/flight_dumps.h"
#include "runtime/group_registry_impl.h"
#include "runtime/message_routes.h"
#include "runtime/pending_work.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>

namespace c10d_func {

using namespace registry_detail;

namespace {

// The calling thread's own scope when its world is per-thread; null: the process's scope.
thread_local GroupRegistry::Impl* thread_scope = nullptr;

// Owns the thread scopes. A scope lives until its thread's world changes again, not until the
// thread exits: thread-exit destructors run where Python can no longer take back the
// ProcessGroups a scope holds.
std::mutex thread_scopes_mutex;
std::map<std::thread::id, std::shared_ptr<GroupRegistry::Impl>>& thread_scopes() {
  static auto* scopes = new std::map<std::thread::id, std::shared_ptr<GroupRegistry::Impl>>();
  return *scopes;
}

GroupRegistry::Impl& process_scope() {
  static auto* state = new GroupRegistry::Impl();
  return *state;
}

}  // namespace

GroupRegistry& GroupRegistry::instance() {
  // Never destroyed: transports' threads may outlive static destruction at exit, and tearing
  // them down there can block on a peer; the OS reclaims everything instead.
  static auto* registry = new GroupRegistry();
  return *registry;
}

GroupRegistry::Impl& GroupRegistry::impl() {
  return thread_scope ? *thread_scope : process_scope();
}

void GroupRegistry::enter_thread_scope() {
  auto scope = std::make_shared<Impl>();
  scope->copy_config_from(process_scope());
  std::shared_ptr<Impl> previous;
  {
    std::lock_guard<std::mutex> lock(thread_scopes_mutex);
    auto& owned = thread_scopes()[std::this_thread::get_id()];
    previous = std::move(owned);
    owned = scope;
  }
  thread_scope = scope.get();
  // `previous` (the thread's earlier world) is released here, by the thread that owned it.
}

void GroupRegistry::leave_thread_scope() {
  std::shared_ptr<Impl> previous;
  {
    std::lock_guard<std::mutex> lock(thread_scopes_mutex);
    auto it = thread_scopes().find(std::this_thread::get_id());
    if (it != thread_scopes().end()) {
      previous = std::move(it->second);
      thread_scopes().erase(it);
    }
  }
  thread_scope = nullptr;
}

void GroupRegistry::world_changed(bool per_thread, bool initialised) {
  if (per_thread) {
    enter_thread_scope();  // the thread's world is resolved again, lazily, from torch's
    return;
  }
  leave_thread_scope();
  if (!initialised) {
    shutdown();  // the default group is gone: so are the groups formed in its world
  }
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    if (impl().world && impl().world->origin != "init") {
      impl().world.reset();  // the next call resolves the new world
    }
  }
  impl().clear_cache();
}

void GroupRegistry::set_group_binder(GroupBinder binder) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().binder = std::move(binder);
}

void GroupRegistry::set_world(World world) {
  TORCH_CHECK(world.store, "c10d_func.init: argument 'store' must not be None");
  TORCH_CHECK(world.size > 0, "c10d_func.init: argument 'world_size' must be positive, got ",
              world.size);
  TORCH_CHECK(world.rank >= 0 && world.rank < world.size, "c10d_func.init: argument 'rank' (",
              world.rank, ") must be in [0, ", world.size, ")");
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().world = std::move(world);
  }
  impl().clear_cache();
}

void GroupRegistry::set_world_provider(WorldProvider provider) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().provider = std::move(provider);
}

std::optional<World> GroupRegistry::current_world() {
  std::lock_guard<std::mutex> lock(impl().mutex);
  return impl().world;
}

World GroupRegistry::world(std::string_view op) {
  std::unique_lock<std::mutex> lock(impl().mutex);
  if (impl().world) {
    return *impl().world;
  }
  auto provider = impl().provider;
  lock.unlock();
  // Discovery may block (a TCPStore connecting), so it runs without the lock; a racing thread
  // may discover too, and the first result wins.
  std::optional<World> found = provider ? provider() : std::nullopt;
  if (!found) {
    found = world_from_env(op);
  }
  TORCH_CHECK(
      found.has_value(), "c10d_func.", op, ": no world to resolve the group against: call ",
      "torch.distributed.init_process_group(...) or c10d_func.init(store, rank, world_size), or ",
      "set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE");
  if (found->per_thread && thread_scope == nullptr) {
    // The default group of this thread was made before c10d_func could follow it: give the
    // thread its scope now (resolve() notices and starts over in it).
    enter_thread_scope();
  }
  std::lock_guard<std::mutex> relock(impl().mutex);
  if (!impl().world) {
    impl().world = std::move(found);
  }
  return *impl().world;
}

std::shared_ptr<const ResolvedGroup> GroupRegistry::resolve(std::string_view op, c10::Device device,
                                                            std::string_view tag,
                                                            c10::ArrayRef<int64_t> ranks,
                                                            int64_t group_size) {
  auto& state = impl();
  const ResolveProbe probe{device.type(), device.index(), tag, ranks, group_size};
  uint64_t epoch = 0;
  {
    std::shared_lock<std::shared_mutex> lock(state.cache_mutex);
    auto it = state.cache.find(probe);
    if (it != state.cache.end() && !it->second->communicator->failed()) {
      return it->second;
    }
    epoch = state.cache_epoch;
  }
  // First call of this group (or its communicator failed: communicator() raises saying so).
  auto resolved = std::make_shared<ResolvedGroup>();
  resolved->spec = GroupSpec::parse(op, tag, ranks, group_size);
  const World world = this->world(op);
  if (&impl() != &state) {
    return resolve(op, device, tag, ranks, group_size);  // the world moved this thread's scope
  }
  resolved->spec.check_world(op, world.size);
  resolved->chunk = resolved->spec.chunk_of(op, world.rank);
  resolved->communicator = communicator(op, device, resolved->spec, resolved->chunk);
  std::unique_lock<std::shared_mutex> lock(state.cache_mutex);
  if (state.cache_epoch == epoch) {
    state.cache.insert_or_assign(
        ResolveKey{device.type(), device.index(), std::string(tag), ranks.vec(), group_size},
        resolved);
  }
  return resolved;
}

void GroupRegistry::register_communicator(c10::DeviceType device, const std::string& tag,
                                          std::vector<int64_t> members,
                                          std::shared_ptr<Communicator> communicator) {
  auto slot = std::make_shared<Slot>();
  slot->origin = "registered";
  Chunk chunk;
  chunk.members = std::move(members);
  chunk.index = communicator->rank();
  slot->communicator =
      observed(std::move(communicator), chunk_identity(c10::Device(device), tag, chunk),
               collective_timeout());
  // A bound group serves every device index of its type (a ProcessGroup picks its own device).
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().slots[key_of(c10::Device(device), tag, chunk)] = std::move(slot);
  }
  impl().clear_cache();
}

void GroupRegistry::drop_slots(const SlotFilter& dropping) {
  std::vector<std::shared_ptr<Slot>> dropped;  // destroyed after the registry lock is released
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    for (auto it = impl().slots.begin(); it != impl().slots.end();) {
      bool drop = false;
      {
        // A slot being formed holds its lock, and is no formed or bound group's.
        std::unique_lock<std::mutex> slot_lock(it->second->mutex, std::try_to_lock);
        drop = slot_lock.owns_lock() && it->second->communicator &&
               dropping(std::get<2>(it->first), std::get<3>(it->first), it->second->origin,
                        it->second->communicator);
      }
      if (drop) {
        dropped.push_back(std::move(it->second));
        it = impl().slots.erase(it);
      } else {
        ++it;
      }
    }
  }
  impl().clear_cache();
}

void GroupRegistry::forget(const std::vector<std::shared_ptr<Communicator>>& communicators) {
  if (!communicators.empty()) {
    drop_slots([&](const std::string&, const std::vector<int64_t>&, const std::string&,
                   const std::shared_ptr<Communicator>& communicator) {
      return std::find(communicators.begin(), communicators.end(), communicator) !=
             communicators.end();
    });
  }
}

void GroupRegistry::unbind(const std::string& tag, const std::vector<int64_t>& members) {
  drop_slots([&](const std::string& slot_tag, const std::vector<int64_t>& slot_members,
                 const std::string& origin, const std::shared_ptr<Communicator>&) {
    return origin == "registered" && slot_tag == tag && slot_members == members;
  });
}

std::vector<GroupInfo> GroupRegistry::groups() {
  std::lock_guard<std::mutex> lock(impl().mutex);
  std::vector<GroupInfo> infos;
  for (const auto& [key, slot] : impl().slots) {
    std::unique_lock<std::mutex> slot_lock(slot->mutex, std::try_to_lock);
    if (!slot_lock.owns_lock() || !slot->communicator) {
      continue;  // being created, or its creation failed
    }
    GroupInfo info;
    info.device = device_name(std::get<0>(key));
    if (std::get<1>(key) >= 0) {
      info.device += ":" + std::to_string(std::get<1>(key));
    }
    info.tag = std::get<2>(key);
    info.members = std::get<3>(key);
    info.rank = slot->communicator->rank();
    info.backend = slot->communicator->backend_name();
    info.origin = slot->origin;
    info.failure = slot->communicator->failure();
    info.memory = slot->communicator->memory_stats();
    info.activity = slot->communicator->activity();
    infos.push_back(std::move(info));
  }
  return infos;
}

void GroupRegistry::shutdown() {
  drain_pending();
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().slots.clear();
    impl().split_partitions.clear();
  }
  impl().clear_cache();
  forget_message_routes();
  stop_watching_for_flight_dumps();
  // The world stays: an env:// store torn down here and re-created by the next call would let
  // a fast peer reconnect to the old server just before it goes away.
}

}  // namespace c10d_func
