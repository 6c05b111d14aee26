#pragma once
// The registry's state, private to the files that implement GroupRegistry: group_registry.cpp
// (scopes, world, resolution, introspection), group_formation.cpp (forming and splitting
// communicators) and transport_choice.cpp (which transport serves a group).
#include "runtime/group_registry.h"

#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace c10d_func {
namespace registry_detail {

// (device type, device index, tag, chunk members)
using Key = std::tuple<c10::DeviceType, int, std::string, std::vector<int64_t>>;
// (device type, device index, tag, ranks, group_size): a partition already split from the world
using PartitionKey = std::tuple<c10::DeviceType, int, std::string, std::vector<int64_t>, int64_t>;

struct Slot {
  std::mutex mutex;  // held while this key's communicator is being created
  std::shared_ptr<Communicator> communicator;
  std::string origin;
  // The transport it was formed with ("local" for a chunk of one member on no chosen transport;
  // empty for a registered group): set_transport refuses to change a formed tag's transport.
  std::string transport;
};

inline std::string device_name(c10::DeviceType device) {
  return c10::DeviceTypeName(device, /*lower_case=*/true);
}

inline Key key_of(c10::Device device, const std::string& tag, const Chunk& chunk) {
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

// A tag that may name torch's ProcessGroup: `ptd:<name>` names the group of that name, and any
// other non-empty tag may be a group's user tag (pg_tag), which torch's functional collectives
// put in graphs as the group's tag. The binder looks it up; a tag torch has no group for keeps
// c10d_func's own communicator.
inline bool may_name_a_process_group(std::string_view tag) {
  return !tag.empty();
}

}  // namespace registry_detail

struct GroupRegistry::Impl {
  using Key = registry_detail::Key;
  using PartitionKey = registry_detail::PartitionKey;
  using Slot = registry_detail::Slot;
  using ResolveKey = registry_detail::ResolveKey;
  using ResolveHash = registry_detail::ResolveHash;
  using ResolveEqual = registry_detail::ResolveEqual;

  std::mutex mutex;
  std::optional<World> world;
  WorldProvider provider;
  GroupBinder binder;
  std::map<c10::DeviceType, std::map<std::string, Transport>> transports;
  std::map<std::pair<c10::DeviceType, std::string>, std::string> chosen;  // (device, tag) -> name
  std::map<Key, std::shared_ptr<Slot>> slots;
  std::set<PartitionKey> split_partitions;
  // How many formations of each set of members (device type, tag, members sorted) this process
  // began: part of their store prefixes (group_formation.cpp), the same on every member, so a
  // key formed again (after shutdown(), or after a failed attempt) never meets an earlier
  // attempt's keys.
  std::map<Key, int64_t> formations;

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

}  // namespace c10d_func
