// The group-resolution registry; see group_registry.h.
#include "ops/group_registry.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <c10/util/Exception.h>

#include "ops/pending_work.h"

#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

namespace c10d_func {
namespace {

using Key = std::tuple<c10::DeviceType, std::string, std::vector<int64_t>>;

struct Slot {
  std::mutex mutex; // held while this key's communicator is being created
  std::shared_ptr<Communicator> communicator;
  std::string origin;
};

std::string device_name(c10::DeviceType device) {
  return c10::DeviceTypeName(device, /*lower_case=*/true);
}

} // namespace

struct GroupRegistry::Impl {
  std::mutex mutex;
  std::optional<World> world;
  WorldProvider provider;
  std::map<c10::DeviceType, CommunicatorFactory> factories;
  std::map<Key, std::shared_ptr<Slot>> slots;
  // How often each key was created in this process; part of the store prefix so a key created
  // again after shutdown() never meets the previous rendezvous's keys.
  std::map<Key, int64_t> generations;
};

GroupRegistry& GroupRegistry::instance() {
  // Never destroyed: transports' threads may outlive static destruction at exit, and tearing
  // them down there can block on a peer; the OS reclaims everything instead.
  static auto* registry = new GroupRegistry();
  return *registry;
}

GroupRegistry::Impl& GroupRegistry::impl() {
  static auto* state = new Impl();
  return *state;
}

void GroupRegistry::set_world(World world) {
  TORCH_CHECK(world.store, "c10d_func.init: argument 'store' must not be None");
  TORCH_CHECK(world.size > 0, "c10d_func.init: argument 'world_size' must be positive, got ",
              world.size);
  TORCH_CHECK(world.rank >= 0 && world.rank < world.size, "c10d_func.init: argument 'rank' (",
              world.rank, ") must be in [0, ", world.size, ")");
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().world = std::move(world);
}

void GroupRegistry::set_world_provider(WorldProvider provider) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().provider = std::move(provider);
}

void GroupRegistry::set_factory(c10::DeviceType device, CommunicatorFactory factory) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().factories[device] = std::move(factory);
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
    found = world_from_env();
  }
  TORCH_CHECK(
      found.has_value(), "c10d_func.", op, ": no world to resolve the group against: call ",
      "torch.distributed.init_process_group(...) or c10d_func.init(store, rank, world_size), or ",
      "set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE");
  lock.lock();
  if (!impl().world) {
    impl().world = std::move(found);
  }
  return *impl().world;
}

std::shared_ptr<Communicator> GroupRegistry::communicator(
    std::string_view op,
    c10::DeviceType device,
    const std::string& tag,
    const Chunk& chunk) {
  Key key{device, tag, chunk.members};
  std::shared_ptr<Slot> slot;
  CommunicatorFactory factory;
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    auto& entry = impl().slots[key];
    if (!entry) {
      entry = std::make_shared<Slot>();
    }
    slot = entry;
    auto it = impl().factories.find(device);
    if (it != impl().factories.end()) {
      factory = it->second;
    }
    generation = impl().generations[key];
  }

  std::lock_guard<std::mutex> creating(slot->mutex);
  if (!slot->communicator) {
    TORCH_CHECK(
        factory, "c10d_func.", op, ": no transport for ", device_name(device),
        " tensors (import c10d_func to install the Gloo transport, or bind a group with ",
        "c10d_func.register_group)");
    const World world = this->world(op);
    std::ostringstream prefix;
    prefix << "c10d_func/" << device_name(device) << "/" << tag << "/" << chunk.describe() << "/"
           << generation;
    Rendezvous rendezvous;
    rendezvous.store = c10::make_intrusive<c10d::PrefixStore>(prefix.str(), world.store);
    rendezvous.rank = chunk.index;
    rendezvous.size = chunk.size();
    rendezvous.timeout = collective_timeout();
    // Each member announces itself first, so a rendezvous that times out can name who is missing.
    const auto arrived = [](int64_t index) { return "arrived/" + std::to_string(index); };
    rendezvous.store->set(arrived(chunk.index), std::vector<uint8_t>{1});
    try {
      slot->communicator = factory(rendezvous);
    } catch (const std::exception& error) {
      std::vector<int64_t> missing;
      try {
        for (int64_t i = 0; i < chunk.size(); ++i) {
          if (!rendezvous.store->check({arrived(i)})) {
            missing.push_back(chunk.members[i]);
          }
        }
      } catch (const std::exception&) {
        // The store itself is gone; report what we have.
      }
      std::ostringstream why;
      why << "c10d_func." << op << ": could not form the " << device_name(device)
          << " communicator for tag='" << tag << "', chunk " << chunk.describe() << " within "
          << rendezvous.timeout.count() / 1000.0 << " s";
      if (!missing.empty()) {
        why << "; ranks " << format_ranks(missing) << " never arrived";
      }
      why << ": " << error.what();
      TORCH_CHECK(false, why.str());
    }
    slot->origin = "created";
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().generations[key] = generation + 1;
  }
  if (auto failure = slot->communicator->failure()) {
    TORCH_CHECK(
        false, "c10d_func.", op, ": the ", device_name(device), " communicator for tag='", tag,
        "', chunk ", chunk.describe(), " is unusable after an earlier failure (", *failure,
        "); its members are out of step. Use another tag, or call c10d_func.shutdown() on every "
        "member");
  }
  return slot->communicator;
}

void GroupRegistry::register_communicator(
    c10::DeviceType device,
    const std::string& tag,
    std::vector<int64_t> members,
    std::shared_ptr<Communicator> communicator) {
  auto slot = std::make_shared<Slot>();
  slot->communicator = std::move(communicator);
  slot->origin = "registered";
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().slots[Key{device, tag, std::move(members)}] = std::move(slot);
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
    info.tag = std::get<1>(key);
    info.members = std::get<2>(key);
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
  std::lock_guard<std::mutex> lock(impl().mutex);
  impl().slots.clear();
  // The world stays: an env:// store torn down here and re-created by the next call would let
  // a fast peer reconnect to the old server just before it goes away.
}

} // namespace c10d_func
