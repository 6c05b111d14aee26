// Which transport serves a group: the one chosen for its tag (set_transport), else the device's
// C10D_FUNC_<DEVICE>_TRANSPORT, else the default (CPU: auto, CUDA: nccl). See group_registry.h.
#include "runtime/group_registry_impl.h"

#include <cctype>
#include <cstdlib>

namespace c10d_func {

using namespace registry_detail;

namespace {

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

}  // namespace

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

void GroupRegistry::add_transport(c10::DeviceType device, Transport transport) {
  std::lock_guard<std::mutex> lock(impl().mutex);
  auto name = transport.name;
  impl().transports[device][name] = std::move(transport);
}

void GroupRegistry::select_transport(c10::DeviceType device, const std::string& tag,
                                     const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    // A misspelt name fails here, not at the tag's first collective.
    find_transport_locked("set_transport", device, name, tag);
    if (!tag.empty()) {
      refuse_changing_formed_tag_locked(device, tag, name);
    }
    impl().chosen[{device, tag}] = name;
  }
  impl().clear_cache();
}

void GroupRegistry::refuse_changing_formed_tag_locked(c10::DeviceType device,
                                                      const std::string& tag,
                                                      const std::string& name) {
  for (const auto& [key, slot] : impl().slots) {
    if (std::get<0>(key) != device || std::get<2>(key) != tag) {
      continue;
    }
    // A slot being formed holds its lock; it was chosen before this call, and its first
    // collective is racing with the choice, which the documentation already rules out.
    std::unique_lock<std::mutex> slot_lock(slot->mutex, std::try_to_lock);
    if (!slot_lock.owns_lock() || !slot->communicator || slot->transport.empty()) {
      continue;  // forming, failed to form, or a bound ProcessGroup (served whatever is chosen)
    }
    // "auto" forms shm, gloo or shm+gloo: choosing what it formed changes nothing. Nor does
    // choosing "auto" for a group formed on "shm": its members are on one host, where auto
    // forms shm.
    const std::string formed_as = slot->communicator->backend_name();
    if (slot->transport == name || formed_as == name || (name == "auto" && formed_as == "shm")) {
      continue;
    }
    Chunk chunk;
    chunk.members = std::get<3>(key);
    TORCH_CHECK(false, "c10d_func.set_transport: tag '", tag, "' already has a ",
                device_name(device), " group of members ", chunk.describe(),
                " formed on transport '", slot->transport, "' (serving as '", formed_as,
                "'), which keeps it; choosing '", name,
                "' now would leave the tag's groups on different transports. Choose a tag's ",
                "transport before its first collective, use another tag, or call ",
                "c10d_func.shutdown() on every member first");
  }
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

}  // namespace c10d_func
