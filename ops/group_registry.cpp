// The group-resolution registry; see group_registry.h.
#include "ops/group_registry.h"

#include "ops/message_routes.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <c10/util/Exception.h>

#include "ops/pending_work.h"
#include "ops/solo_communicator.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace c10d_func {
namespace {

// (device type, device index, tag, chunk members)
using Key = std::tuple<c10::DeviceType, int, std::string, std::vector<int64_t>>;
// (device type, device index, tag, ranks, group_size): a partition already split from the world
using PartitionKey = std::tuple<c10::DeviceType, int, std::string, std::vector<int64_t>, int64_t>;

struct Slot {
  std::mutex mutex; // held while this key's communicator is being created
  std::shared_ptr<Communicator> communicator;
  std::string origin;
};

std::string device_name(c10::DeviceType device) {
  return c10::DeviceTypeName(device, /*lower_case=*/true);
}

Key key_of(c10::Device device, const std::string& tag, const Chunk& chunk) {
  return Key{device.type(), device.has_index() ? device.index() : -1, tag, chunk.members};
}

// The resolve cache's key, and the view of a call's arguments that finds it without copying them
// (heterogeneous lookup: the per-call path allocates nothing).
struct ResolveKey {
  c10::DeviceType type;
  c10::DeviceIndex index;
  std::string tag;
  std::vector<int64_t> ranks;
  int64_t group_size;
};

struct ResolveProbe {
  c10::DeviceType type;
  c10::DeviceIndex index;
  std::string_view tag;
  c10::ArrayRef<int64_t> ranks;
  int64_t group_size;
};

template <typename K>
size_t hash_key(const K& key) {
  size_t seed = std::hash<std::string_view>{}(std::string_view(key.tag));
  const auto mix = [&seed](size_t value) {
    seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
  };
  mix(static_cast<size_t>(key.type));
  mix(static_cast<size_t>(key.index));
  mix(static_cast<size_t>(key.group_size));
  for (int64_t rank : key.ranks) {
    mix(static_cast<size_t>(rank));
  }
  return seed;
}

struct ResolveHash {
  using is_transparent = void;
  size_t operator()(const ResolveKey& key) const { return hash_key(key); }
  size_t operator()(const ResolveProbe& key) const { return hash_key(key); }
};

struct ResolveEqual {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.type == b.type && a.index == b.index && a.group_size == b.group_size &&
        std::string_view(a.tag) == std::string_view(b.tag) &&
        c10::ArrayRef<int64_t>(a.ranks) == c10::ArrayRef<int64_t>(b.ranks);
  }
};

// C10D_FUNC_<DEVICE>_TRANSPORT, read once per device type.
std::optional<std::string> transport_from_env(c10::DeviceType device) {
  static std::mutex mutex;
  static auto* read = new std::map<c10::DeviceType, std::optional<std::string>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = read->find(device);
  if (it == read->end()) {
    std::string variable = "C10D_FUNC_" + device_name(device) + "_TRANSPORT";
    for (char& c : variable) {
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    const char* value = std::getenv(variable.c_str());
    it = read->emplace(device, value && *value ? std::optional<std::string>(value) : std::nullopt)
             .first;
  }
  return it->second;
}

// True when `spec` cuts the whole world into chunks smaller than the world.
bool partitions_world(const GroupSpec& spec, int64_t world_size) {
  return static_cast<int64_t>(spec.ranks.size()) == world_size && spec.group_size < world_size;
}

} // namespace

struct GroupRegistry::Impl {
  std::mutex mutex;
  std::optional<World> world;
  WorldProvider provider;
  GroupBinder binder;
  std::map<c10::DeviceType, std::map<std::string, Transport>> transports;
  std::map<std::pair<c10::DeviceType, std::string>, std::string> chosen; // (device, tag) -> name
  std::map<Key, std::shared_ptr<Slot>> slots;
  std::set<PartitionKey> split_partitions;
  // How often each key was created in this process; part of the store prefix so a key created
  // again after shutdown() never meets the previous rendezvous's keys.
  std::map<Key, int64_t> generations;

  // resolve()'s cache. Anything that changes what a group resolves to (a new world, a transport
  // choice, a bound group, shutdown) clears it and bumps the epoch, so a resolution that raced
  // with the change is not cached.
  std::shared_mutex cache_mutex;
  std::unordered_map<ResolveKey, std::shared_ptr<const ResolvedGroup>, ResolveHash, ResolveEqual>
      cache;
  uint64_t cache_epoch = 0;

  void clear_cache() {
    std::unique_lock<std::shared_mutex> lock(cache_mutex);
    cache.clear();
    ++cache_epoch;
  }

  // A thread's scope starts with the process's configuration and no world or groups.
  void copy_config_from(Impl& other) {
    std::lock_guard<std::mutex> lock(other.mutex);
    provider = other.provider;
    binder = other.binder;
    transports = other.transports;
    chosen = other.chosen;
  }
};

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

bool names_a_process_group(std::string_view tag) {
  return tag.substr(0, 4) == "ptd:";
}

} // namespace

std::string ResolvedGroup::describe() const {
  return spec.describe() + ", chunk " + chunk.describe();
}

Transport GroupRegistry::find_transport_locked(std::string_view op, c10::DeviceType device,
                                               const std::string& name, const std::string& tag) {
  auto& available = impl().transports[device];
  auto it = available.find(name);
  if (it == available.end()) {
    std::string known;
    for (const auto& [candidate, _] : available) {
      known += (known.empty() ? "" : ", ") + candidate;
    }
    TORCH_CHECK(false, "c10d_func.", op, ": no '", name, "' transport for ", device_name(device),
                " tensors (tag='", tag, "'); available: ", known.empty() ? "none" : known,
                ". CPU: auto (shm on one host, else Gloo), shm or gloo; CUDA: nccl when the ",
                "library is built with CUDA, or gloo; a ProcessGroup can be bound with ",
                "c10d_func.register_group");
  }
  return it->second;
}

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
    enter_thread_scope(); // the thread's world is resolved again, lazily, from torch's
    return;
  }
  leave_thread_scope();
  if (!initialised) {
    shutdown(); // the default group is gone: so are the groups formed in its world
  }
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    if (impl().world && impl().world->origin != "init") {
      impl().world.reset(); // the next call resolves the new world
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

void GroupRegistry::add_transport(c10::DeviceType device, Transport transport) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  auto name = transport.name;
  impl().transports[device][name] = std::move(transport);
}

void GroupRegistry::select_transport(c10::DeviceType device, const std::string& tag,
                                     const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().chosen[{device, tag}] = name;
  }
  impl().clear_cache();
}

Transport GroupRegistry::transport_for(std::string_view op, c10::DeviceType device,
                                       const std::string& tag) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  std::string name;
  bool forced = false;
  if (auto it = impl().chosen.find({device, tag}); it != impl().chosen.end() && !tag.empty()) {
    name = it->second;
    forced = true;
  } else if (auto it = impl().chosen.find({device, tag}); it != impl().chosen.end()) {
    name = it->second;
  } else if (auto all = impl().chosen.find({device, ""}); all != impl().chosen.end()) {
    name = all->second;
  } else {
    // CPU: "auto" is shm for a chunk on one host, Gloo for one spanning hosts.
    name = transport_from_env(device).value_or(device == c10::DeviceType::CUDA ? "nccl" : "auto");
  }
  Transport chosen = find_transport_locked(op, device, name, tag);
  chosen.forced = forced;
  return chosen;
}

Transport GroupRegistry::find_transport(std::string_view op, c10::DeviceType device,
                                        const std::string& name) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  return find_transport_locked(op, device, name, "");
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

std::shared_ptr<const ResolvedGroup> GroupRegistry::resolve(
    std::string_view op,
    c10::Device device,
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
    return resolve(op, device, tag, ranks, group_size); // the world moved this thread's scope
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

std::shared_ptr<Communicator> GroupRegistry::communicator(
    std::string_view op,
    c10::Device device,
    const GroupSpec& spec,
    const Chunk& chunk) {
  // A communicator bound with register_group wins over any transport.
  if (auto bound = registered(device, spec.tag, chunk)) {
    return bound;
  }
  const World world = this->world(op);
  if (names_a_process_group(spec.tag) || world.delegated) {
    GroupBinder binder;
    {
      std::lock_guard<std::mutex> lock(impl().mutex);
      binder = impl().binder;
    }
    if (binder && binder(op, device, spec.tag, spec.ranks, spec.group_size, world.delegated)) {
      if (auto bound = registered(device, spec.tag, chunk)) {
        return bound;
      }
    }
    TORCH_CHECK(!world.delegated, "c10d_func.", op, ": ranks ", chunk.describe(), " (tag='",
                spec.tag, "') have no torch.distributed process group to run on, and this ",
                "world's collectives run only on torch's groups (ranks are threads, the world is ",
                "fake, or its default group is written in Python): create the group with ",
                "torch.distributed.new_group on every rank, or pass it as group=");
  }
  const Transport transport = transport_for(op, device.type(), spec.tag);
  if (transport.splits_world) {
    if (partitions_world(spec, world.size)) {
      split_world(op, device, spec, chunk, transport, world);
    }
  }
  auto communicator = chunk_communicator(op, device, spec.tag, chunk, transport);
  if (auto failure = communicator->failure()) {
    TORCH_CHECK(
        false, "c10d_func.", op, ": the ", device_name(device.type()), " communicator for tag='",
        spec.tag, "', chunk ", chunk.describe(), " is unusable after an earlier failure (",
        *failure, "); its members are out of step. Use another tag, or call ",
        "c10d_func.shutdown() on every member");
  }
  return communicator;
}

std::shared_ptr<Communicator> GroupRegistry::registered(c10::Device device, const std::string& tag,
                                                       const Chunk& chunk) {
  // Bound for a device type (a ProcessGroup picks its own device index): look for the exact
  // device, then for any index of its type.
  std::lock_guard<std::mutex> lock(impl().mutex);
  for (const c10::Device bound : {device, c10::Device(device.type())}) {
    auto it = impl().slots.find(key_of(bound, tag, chunk));
    if (it != impl().slots.end() && it->second->origin == "registered") {
      return it->second->communicator;
    }
  }
  return nullptr;
}

void GroupRegistry::split_world(std::string_view op, c10::Device device, const GroupSpec& spec,
                                const Chunk& chunk, const Transport& transport,
                                const World& world) {
  const PartitionKey partition{device.type(), device.has_index() ? device.index() : -1, spec.tag,
                               spec.ranks, spec.group_size};
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    if (impl().split_partitions.count(partition)) {
      return;
    }
  }
  // Every world rank reaches this point for the same partition (each is in one chunk of it and
  // makes the call), so every rank splits exactly once per partition, whatever else it cached.
  Chunk everyone;
  for (int64_t rank = 0; rank < world.size; ++rank) {
    everyone.members.push_back(rank);
  }
  everyone.index = world.rank;
  auto parent = chunk_communicator(op, device, spec.tag, everyone, transport);
  const auto position = std::find(spec.ranks.begin(), spec.ranks.end(), world.rank) - spec.ranks.begin();
  auto child = parent->split(/*color=*/position / spec.group_size, /*key=*/chunk.index);
  std::shared_ptr<Slot> slot;
  {
    // The registry lock is released before the slot's: chunk_communicator takes them in the
    // other order (slot, then registry), and holding both here could deadlock against it.
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().split_partitions.insert(partition);
    if (!child) {
      return; // this transport could not split after all: chunks rendezvous on their own
    }
    auto& entry = impl().slots[key_of(device, spec.tag, chunk)];
    if (!entry) {
      entry = std::make_shared<Slot>();
    }
    slot = entry;
  }
  std::lock_guard<std::mutex> creating(slot->mutex);
  if (!slot->communicator) { // a chunk formed earlier by its members keeps its communicator
    slot->communicator = std::move(child);
    slot->origin = "split";
  }
}

std::shared_ptr<Communicator> GroupRegistry::chunk_communicator(
    std::string_view op,
    c10::Device device,
    const std::string& tag,
    const Chunk& chunk,
    const Transport& transport) {
  const Key key = key_of(device, tag, chunk);
  std::shared_ptr<Slot> slot;
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    auto& entry = impl().slots[key];
    if (!entry) {
      entry = std::make_shared<Slot>();
    }
    slot = entry;
    generation = impl().generations[key];
  }

  std::lock_guard<std::mutex> creating(slot->mutex);
  if (slot->communicator) {
    return slot->communicator;
  }
  if (chunk.size() == 1 && !transport.forced) {
    slot->communicator = make_solo_communicator();
    slot->origin = "created";
    return slot->communicator;
  }
  const World world = this->world(op);
  std::ostringstream prefix;
  prefix << "c10d_func/" << device << "/" << transport.name << "/" << tag << "/"
         << chunk.describe() << "/" << generation;
  Rendezvous rendezvous;
  rendezvous.store =
      c10::make_intrusive<c10d::PrefixStore>(prefix.str(), private_connection(world.store));
  rendezvous.rank = chunk.index;
  rendezvous.size = chunk.size();
  rendezvous.members = chunk.members;
  rendezvous.group = "tag='" + tag + "', chunk " + chunk.describe();
  rendezvous.timeout = collective_timeout();
  rendezvous.device = device;
  slot->communicator = form_communicator(op, transport, rendezvous);
  slot->origin = "created";
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().generations[key] = generation + 1;
  return slot->communicator;
}

std::shared_ptr<Communicator> form_communicator(std::string_view op, const Transport& transport,
                                                const Rendezvous& rendezvous) {
  // Each member announces itself first, so a rendezvous that times out can name who is missing.
  const auto arrived = [](int64_t index) { return "arrived/" + std::to_string(index); };
  rendezvous.store->set(arrived(rendezvous.rank), std::vector<uint8_t>{1});
  try {
    return transport.factory(rendezvous);
  } catch (const std::exception& error) {
    std::vector<int64_t> missing;
    try {
      for (int64_t i = 0; i < rendezvous.size; ++i) {
        if (!rendezvous.store->check({arrived(i)})) {
          missing.push_back(rendezvous.members.at(i));
        }
      }
    } catch (const std::exception&) {
      // The store itself is gone; report what we have.
    }
    std::ostringstream why;
    why << "c10d_func." << op << ": could not form the " << transport.name << " communicator on "
        << rendezvous.device << " for " << rendezvous.group << " within "
        << rendezvous.timeout.count() / 1000.0 << " s";
    if (!missing.empty()) {
      why << "; ranks " << format_ranks(missing) << " never arrived";
    }
    why << ": " << error.what();
    TORCH_CHECK(false, why.str());
  }
}

void GroupRegistry::register_communicator(
    c10::DeviceType device,
    const std::string& tag,
    std::vector<int64_t> members,
    std::shared_ptr<Communicator> communicator) {
  auto slot = std::make_shared<Slot>();
  slot->communicator = std::move(communicator);
  slot->origin = "registered";
  Chunk chunk;
  chunk.members = std::move(members);
  // A bound group serves every device index of its type (a ProcessGroup picks its own device).
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().slots[key_of(c10::Device(device), tag, chunk)] = std::move(slot);
  }
  impl().clear_cache();
}

std::vector<GroupInfo> GroupRegistry::groups() {
  std::lock_guard<std::mutex> lock(impl().mutex);
  std::vector<GroupInfo> infos;
  for (const auto& [key, slot] : impl().slots) {
    std::unique_lock<std::mutex> slot_lock(slot->mutex, std::try_to_lock);
    if (!slot_lock.owns_lock() || !slot->communicator) {
      continue; // being created, or its creation failed
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
  // The world stays: an env:// store torn down here and re-created by the next call would let
  // a fast peer reconnect to the old server just before it goes away.
}

} // namespace c10d_func
