// Forming a group's communicator: a rendezvous of the chunk's members through a store prefix of
// its own, or one split of the world communicator for a partition of the whole world, or the
// group of one's local communicator; and binding a registered ProcessGroup. See
// group_registry.h.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "runtime/debug_check.h"
#include "runtime/group_registry_impl.h"
#include "runtime/store_connections.h"
#include "transports/missing_member_reports.h"
#include "transports/solo/solo_communicator.h"

#include <algorithm>
#include <array>
#include <sstream>

namespace c10d_func {

using namespace registry_detail;

namespace {

// True when `spec` cuts the whole world into chunks smaller than the world.
bool partitions_world(const GroupSpec& spec, int64_t world_size) {
  return static_cast<int64_t>(spec.ranks.size()) == world_size && spec.group_size < world_size;
}

// Where a formation's members meet before any transport's rendezvous: every member posts its
// choices (transport, the order it listed the members in, whether it runs the DETAIL checks) and
// all wait until every member has. Members that chose different transports or orders would each
// wait under a rendezvous of their own until the timeout (the rendezvous' prefix holds both), and
// a DETAIL check on some members only would wait for the others' calls: here they all fail as
// soon as all have come, each naming every member's choices. One set, one wait, one multi-get.
class FormationMeeting {
 public:
  // `place`: the meeting's store, the same for every member whatever its choices.
  FormationMeeting(c10::intrusive_ptr<c10d::Store> place, const Chunk& chunk,
                   const std::string& transport)
      : place_(std::move(place)), chunk_(chunk) {
    mine_[kTransport] = transport;
    mine_[kOrder] = chunk.describe();
    mine_[kChecks] = debug_checks_enabled() ? "DETAIL" : "off";
  }

  // Posts this member's choices and waits for every member's until `timeout`. Returns the members
  // that did not come (then there is nothing to compare).
  std::vector<int64_t> meet(std::chrono::milliseconds timeout) {
    std::string record;
    for (const std::string& choice : mine_) {
      record += choice + '\n';
    }
    std::vector<std::string> keys;
    for (const int64_t member : chunk_.members) {
      keys.push_back(std::to_string(member));
    }
    place_->set(keys.at(chunk_.index), std::vector<uint8_t>(record.begin(), record.end()));
    try {
      place_->wait(keys, timeout);
      for (const auto& value : place_->multiGet(keys)) {
        everyone_.push_back(parse(value));
      }
      return {};
    } catch (const std::exception&) {
    }
    std::vector<int64_t> missing;
    try {
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!place_->check({keys[i]})) {
          missing.push_back(chunk_.members[i]);
        }
      }
    } catch (const std::exception&) {
      // The store itself is gone; report what we have.
    }
    return missing;
  }

  // What the members disagree on, worded for an error; empty where they agree.
  std::string disagreements() const {
    static constexpr const char* kWhy[kChoices][2] = {
        {"chose different transports for this tag",
         "C10D_FUNC_CPU_TRANSPORT, C10D_FUNC_CUDA_TRANSPORT or set_transport differ between "
         "them"},
        {"listed the group's ranks in different orders",
         "a list of ranks is ordered, its order numbering the members: every member must pass "
         "the same list"},
        {"differ in their debug checks",
         "C10D_FUNC_DEBUG=DETAIL (or TORCH_DISTRIBUTED_DEBUG=DETAIL) compares every member's "
         "calls, so it must be set on every member or on none"},
    };
    std::string why;
    for (size_t choice = 0; choice < kChoices; ++choice) {
      std::string others;
      for (size_t i = 0; i < everyone_.size(); ++i) {
        if (everyone_[i][choice] != mine_[choice]) {
          others +=
              ", rank " + std::to_string(chunk_.members.at(i)) + " '" + everyone_[i][choice] + "'";
        }
      }
      if (!others.empty()) {
        why += std::string(" (the members ") + kWhy[choice][0] + ": this member '" + mine_[choice] +
               "'" + others + "; " + kWhy[choice][1] + ")";
      }
    }
    return why;
  }

 private:
  static constexpr size_t kTransport = 0, kOrder = 1, kChecks = 2, kChoices = 3;
  using Choices = std::array<std::string, kChoices>;

  // A member's record, read from the store: lines, each cut to 256 bytes (a peer's bytes are
  // shown in messages, never trusted further); missing lines are empty.
  static Choices parse(const std::vector<uint8_t>& value) {
    Choices choices;
    size_t choice = 0;
    for (size_t at = 0; at < value.size() && choice < kChoices; ++choice) {
      size_t end = at;
      while (end < value.size() && value[end] != '\n') {
        ++end;
      }
      choices[choice].assign(value.begin() + static_cast<std::ptrdiff_t>(at),
                             value.begin() + static_cast<std::ptrdiff_t>(std::min(end, at + 256)));
      at = end + 1;
    }
    return choices;
  }

  c10::intrusive_ptr<c10d::Store> place_;
  const Chunk& chunk_;
  Choices mine_;
  std::vector<Choices> everyone_;  // in member order, once all have come
};

// "c10d_func.<op>: could not form the <transport> communicator on <device> for <group>[ within
// T s][; ranks [..] never arrived]": how every failed formation begins.
std::string formation_failure(std::string_view op, const std::string& transport,
                              const Rendezvous& rendezvous, const std::vector<int64_t>& missing) {
  std::ostringstream why;
  why << "c10d_func." << op << ": could not form the " << transport << " communicator on "
      << rendezvous.device << " for " << rendezvous.group;
  // "Within the timeout" only where it ran out: a transport may refuse at once.
  if (!missing.empty() || std::chrono::steady_clock::now() >= rendezvous.deadline) {
    why << " within " << rendezvous.timeout.count() / 1000.0 << " s";
  }
  if (!missing.empty()) {
    why << "; ranks " << format_ranks(missing) << " never arrived";
  }
  return why.str();
}

// Before forming: the members meet under `place` (see FormationMeeting) and fail at once where
// their choices differ, or at the timeout naming the members that did not come.
void meet_before_forming(std::string_view op, c10::intrusive_ptr<c10d::Store> place,
                         const std::string& transport, const Rendezvous& rendezvous) {
  Chunk chunk;
  chunk.members = rendezvous.members;
  chunk.index = rendezvous.rank;
  FormationMeeting meeting(std::move(place), chunk, transport);
  if (const auto missing = meeting.meet(rendezvous.remaining()); !missing.empty()) {
    TORCH_CHECK(false, formation_failure(op, transport, rendezvous, missing),
                ": they did not come to the group's formation");
  }
  if (const std::string why = meeting.disagreements(); !why.empty()) {
    TORCH_CHECK(false, formation_failure(op, transport, rendezvous, {}), why);
  }
}

}  // namespace

std::string rendezvous_prefix(c10::Device device, const std::string& transport,
                              const std::string& tag, const Chunk& chunk, int64_t formation) {
  std::ostringstream prefix;
  prefix << "c10d_func/" << shared_device(device) << "/" << transport << "/" << tag << "/"
         << chunk.describe() << "/" << formation;
  return prefix.str();
}

GroupIdentity chunk_identity(c10::Device device, const std::string& tag, const Chunk& chunk) {
  GroupIdentity identity;
  // The members' shared name for the group: by device type (see `shared_device`).
  identity.name = "c10d_func/" + shared_device(device) + "/" + tag + "/" + chunk.describe();
  identity.description = "c10d_func";
  identity.members = chunk.members;
  identity.rank = chunk.index;
  if (auto world = GroupRegistry::instance().current_world(); world && !world->per_thread) {
    identity.store = world->store;
  }
  return identity;
}

std::shared_ptr<Communicator> GroupRegistry::communicator(std::string_view op, c10::Device device,
                                                          const GroupSpec& spec,
                                                          const Chunk& chunk) {
  // A communicator bound with register_group wins over any transport.
  if (auto bound = registered(device, spec.tag, chunk)) {
    return bound;
  }
  const World world = this->world(op);
  if (may_name_a_process_group(spec.tag) || world.delegated) {
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
    TORCH_CHECK(false, "c10d_func.", op, ": the ", device_name(device.type()),
                " communicator for tag='", spec.tag, "', chunk ", chunk.describe(),
                " is unusable after an earlier failure (", *failure,
                "); its members are out of step. Use another tag, or call ",
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
  const auto position =
      std::find(spec.ranks.begin(), spec.ranks.end(), world.rank) - spec.ranks.begin();
  auto child = parent->split(/*color=*/position / spec.group_size, /*key=*/chunk.index);
  std::shared_ptr<Slot> slot;
  {
    // The registry lock is released before the slot's: chunk_communicator takes them in the
    // other order (slot, then registry), and holding both here could deadlock against it.
    std::lock_guard<std::mutex> lock(impl().mutex);
    impl().split_partitions.insert(partition);
    if (!child) {
      return;  // this transport could not split after all: chunks rendezvous on their own
    }
    auto& entry = impl().slots[key_of(device, spec.tag, chunk)];
    if (!entry) {
      entry = std::make_shared<Slot>();
    }
    slot = entry;
  }
  std::lock_guard<std::mutex> creating(slot->mutex);
  if (!slot->communicator) {  // a chunk formed earlier by its members keeps its communicator
    slot->communicator =
        observed(std::move(child), chunk_identity(device, spec.tag, chunk), collective_timeout());
    slot->origin = "split";
    slot->transport = transport.name;
  }
}

std::shared_ptr<Communicator> GroupRegistry::chunk_communicator(std::string_view op,
                                                                c10::Device device,
                                                                const std::string& tag,
                                                                const Chunk& chunk,
                                                                const Transport& transport) {
  const Key key = key_of(device, tag, chunk);
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    auto& entry = impl().slots[key];
    if (!entry) {
      entry = std::make_shared<Slot>();
    }
    slot = entry;
  }

  std::lock_guard<std::mutex> creating(slot->mutex);
  if (slot->communicator) {
    return slot->communicator;
  }
  if (chunk.size() == 1 && !transport.forced) {
    slot->communicator = observed(make_solo_communicator(), chunk_identity(device, tag, chunk),
                                  collective_timeout());
    slot->origin = "created";
    slot->transport = "local";
    return slot->communicator;
  }
  const World world = this->world(op);
  const c10::intrusive_ptr<c10d::Store> connection = private_connection(world.store);
  // Every formation is named by what every member's call shares whatever it chose (device type,
  // tag, the members' set) and by how many formations of that set this process began: members
  // begin them in the same order, so each formation, failed or not, has a place of its own.
  Chunk members_set = chunk;
  std::sort(members_set.members.begin(), members_set.members.end());
  int64_t formation = 0;
  {
    std::lock_guard<std::mutex> lock(impl().mutex);
    formation = impl().formations[key_of(c10::Device(device.type()), tag, members_set)]++;
  }
  Rendezvous rendezvous;
  rendezvous.store = c10::make_intrusive<c10d::PrefixStore>(
      rendezvous_prefix(device, transport.name, tag, chunk, formation), connection);
  rendezvous.rank = chunk.index;
  rendezvous.size = chunk.size();
  rendezvous.members = chunk.members;
  rendezvous.group = "tag='" + tag + "', chunk " + chunk.describe();
  rendezvous.timeout = collective_timeout();
  rendezvous.deadline = std::chrono::steady_clock::now() + rendezvous.timeout;
  rendezvous.device = device;
  // The rendezvous' prefix holds the transport and the members' order; the meeting's holds
  // neither, so members that differ in them meet there and are told.
  auto formed = form_communicator(
      op, transport, rendezvous,
      c10::make_intrusive<c10d::PrefixStore>("c10d_func/" + shared_device(device) + "/" + tag +
                                                 "/" + members_set.describe() + "/meeting/" +
                                                 std::to_string(formation) + "/",
                                             connection));
  slot->communicator =
      observed(std::move(formed), chunk_identity(device, tag, chunk), rendezvous.timeout);
  slot->origin = "created";
  slot->transport = transport.name;
  return slot->communicator;
}

std::shared_ptr<Communicator> form_communicator(std::string_view op, const Transport& transport,
                                                const Rendezvous& rendezvous,
                                                c10::intrusive_ptr<c10d::Store> meeting) {
  if (!meeting) {
    meeting = c10::make_intrusive<c10d::PrefixStore>("meeting/", rendezvous.store);
  }
  meet_before_forming(op, std::move(meeting), transport.name, rendezvous);
  // Each member announces itself first, so a rendezvous that times out can name who is missing.
  const auto arrived = [](int64_t index) { return "arrived/" + std::to_string(index); };
  rendezvous.store->set(arrived(rendezvous.rank), std::vector<uint8_t>{1});
  try {
    auto communicator = transport.factory(rendezvous);
    if (transport.needs_roll_call && rendezvous.device.is_cpu()) {
      return reporting_missing_members(
          std::move(communicator),
          std::make_shared<FailureRollCall>(rendezvous, std::vector<int64_t>{}));
    }
    return communicator;
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
    // The cause without its C++ backtrace (a store's timeout carries one), so what follows it
    // in the message stays readable.
    const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
    TORCH_CHECK(false, formation_failure(op, transport.name, rendezvous, missing), ": ",
                c10_error != nullptr ? c10_error->what_without_backtrace() : error.what());
  }
}

}  // namespace c10d_func
