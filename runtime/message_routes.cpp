// Message routes per (world, tag, chunk); see message_routes.h.
#include "runtime/message_routes.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <map>
#include <mutex>
#include <tuple>

namespace c10d_func {
namespace {

// (world store, tag, chunk members): a new world (destroy + init) gets new channels.
using RouteKey = std::tuple<const c10d::Store*, std::string, std::vector<int64_t>>;

struct Routes {
  std::mutex mutex;
  std::map<RouteKey, MessageRoute> routes;
};

Routes& routes() {
  // Never destroyed: channel threads may still deliver during exit.
  static auto* instance = new Routes();
  return *instance;
}

}  // namespace

MessageRoute message_route(std::string_view op, std::string_view tag, c10::ArrayRef<int64_t> ranks,
                           int64_t group_size) {
  GroupSpec spec = GroupSpec::parse(op, tag, ranks, group_size);
  const World world = GroupRegistry::instance().world(op);
  TORCH_CHECK(!world.delegated, "c10d_func.", op,
              ": point-to-point messages need a world that c10d_func forms groups in (env://, "
              "c10d_func.init, or a default process group backed by Gloo, NCCL or c10d_func); "
              "this world's groups belong to torch (ranks as threads, a fake world, or a Python "
              "default group)");
  spec.check_world(op, world.size);
  Chunk chunk = spec.chunk_of(op, world.rank);
  RouteKey key{world.store.get(), spec.tag, chunk.members};
  auto& state = routes();
  std::lock_guard<std::mutex> lock(state.mutex);
  auto it = state.routes.find(key);
  if (it != state.routes.end()) {
    return it->second;
  }
  auto group = std::make_shared<ResolvedGroup>();
  group->spec = std::move(spec);
  group->chunk = std::move(chunk);
  const std::string prefix =
      "c10d_func/messages/" + group->spec.tag + "/" + group->chunk.describe() + "/";
  auto channels = std::make_shared<PointToPoint>(
      c10::make_intrusive<c10d::PrefixStore>(prefix, world.store), group->chunk.index,
      group->chunk.members, collective_timeout(), group->describe(),
      AnySource::kNever);  // c10d_func.irecv always names its source
  channels->observe_with(std::make_shared<GroupObserver>(
      chunk_identity(c10::Device(c10::kCPU), group->spec.tag, group->chunk)));
  MessageRoute route{std::move(group), std::move(channels)};
  state.routes.emplace(std::move(key), route);
  return route;
}

void check_peer(std::string_view op, std::string_view arg, int64_t peer,
                const ResolvedGroup& group) {
  TORCH_CHECK(peer != group.chunk.index, "c10d_func.", op, ": ", arg, "=", peer,
              " is the caller itself (its index in chunk ", group.chunk.describe(),
              "); a message goes to another member of the group");
}

void forget_message_routes() {
  std::map<RouteKey, MessageRoute> dropped;  // their channels' threads join outside the lock
  auto& state = routes();
  std::lock_guard<std::mutex> lock(state.mutex);
  dropped.swap(state.routes);
}

void forget_message_routes(std::string_view tag) {
  std::vector<MessageRoute> dropped;
  auto& state = routes();
  std::lock_guard<std::mutex> lock(state.mutex);
  for (auto it = state.routes.begin(); it != state.routes.end();) {
    if (std::get<1>(it->first) == tag) {
      dropped.push_back(std::move(it->second));
      it = state.routes.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace c10d_func
