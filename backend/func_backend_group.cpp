// FuncBackend's group-level methods (func_backend.h): its communicators and Works, timeouts,
// torch's Backend.Options, split and merge, the device step of split_group, and
// monitored_barrier. The collectives and messages are in func_backend.cpp.
#include "backend/func_backend.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend/c10d_call_arguments.h"
#include "backend/func_work.h"
#include "backend/monitored_barrier.h"
#include "backend/op_deadline.h"
#include "runtime/group_registry.h"
#include "runtime/observed_communicator.h"
#include "runtime/store_connections.h"
#include "transports/rank_format.h"
#include "transports/rendezvous.h"
#include "transports/solo/solo_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace c10d_func {

using namespace backend_detail;

namespace {

// Whether this member counts its CPU messages in the store, for receivers from any source
// (C10D_FUNC_ANNOUNCE_SENDS=0: not; read as each group is made).
AnySource any_source_support() {
  const char* value = std::getenv("C10D_FUNC_ANNOUNCE_SENDS");
  return value == nullptr || std::string_view(value) != "0" ? AnySource::kCounted
                                                            : AnySource::kRefused;
}

}  // namespace

FuncBackend::FuncBackend(FuncBackendOptions options)
    : Backend(static_cast<int>(options.rank), static_cast<int>(options.size)),
      options_(std::move(options)),
      timeout_ms_(options_.timeout.count()),
      tag_("ptd:" + options_.name),
      group_(std::make_shared<const std::string>("process group '" + options_.name + "' (ranks " +
                                                 format_ranks(options_.members) + ")")),
      point_to_point_(options_.store, options_.rank, options_.members, options_.timeout, *group_,
                      any_source_support()) {
  TORCH_CHECK(static_cast<int64_t>(options_.members.size()) == options_.size, kPrefix, "group '",
              options_.name, "' lists ", options_.members.size(), " global ranks for a group of ",
              options_.size);
  // Every member is creating the group right now, so its CPU communicator forms here: a missing
  // member fails the group's creation (naming it) instead of its first collective.
  (void)communicator(c10::Device(c10::kCPU), "init_process_group");
}

std::string FuncBackend::describe(std::string_view op) const {
  return std::string(op) + " on " + *group_;
}

void FuncBackend::check_open(std::string_view op) const {
  const char* why = closed_.load(std::memory_order_acquire);
  TORCH_CHECK(why == nullptr, kPrefix, describe(op), ": the group was ", why,
              "; create a new group");
}

void FuncBackend::close(const char* why, const std::string& failure) {
  std::vector<std::shared_ptr<Communicator>> formed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_.load(std::memory_order_relaxed) != nullptr) {
      return;  // destroy_process_group after abort, or a second shutdown
    }
    closed_.store(why, std::memory_order_release);
    for (auto& [key, communicator] : communicators_) {
      if (communicator) {
        formed.push_back(std::move(communicator));
      }
    }
    communicators_.clear();
  }
  if (!failure.empty()) {
    for (const auto& communicator : formed) {
      communicator->mark_failed(failure);
    }
  }
  // Under the tag of this group and any other it was bound to (register_group).
  GroupRegistry::instance().forget(formed);
}

void FuncBackend::shutdown() {
  close("shut down (destroy_process_group)", "");
}

void FuncBackend::abort() {
  close("aborted (ProcessGroup.abort)",
        "the group was aborted (ProcessGroup.abort) on rank " + std::to_string(options_.rank));
}

std::shared_ptr<Communicator> FuncBackend::communicator(c10::Device device, std::string_view op) {
  const std::pair<int, int> key{static_cast<int>(device.type()),
                                device.is_cpu() ? -1 : static_cast<int>(device.index())};
  std::lock_guard<std::mutex> lock(mutex_);
  check_open(op);  // under the lock: close() cannot slip in before a new slot forms
  auto& slot = communicators_[key];
  if (!slot) {
    // By device type, and how many of that type this group formed before: each rank serves its
    // own device index.
    const auto formed_before = std::count_if(
        communicators_.begin(), communicators_.end(),
        [&](const auto& entry) { return entry.first.first == key.first && entry.second; });
    std::ostringstream prefix;
    prefix << "c10d_func/" << shared_device(device) << "/" << formed_before << "/";
    Rendezvous rendezvous;
    rendezvous.store =
        c10::make_intrusive<c10d::PrefixStore>(prefix.str(), private_connection(options_.store));
    rendezvous.rank = options_.rank;
    rendezvous.size = options_.size;
    rendezvous.members = options_.members;
    rendezvous.group = "process group '" + options_.name + "'";
    rendezvous.timeout = timeout();
    rendezvous.device = device;
    rendezvous.deadline = std::chrono::steady_clock::now() + rendezvous.timeout;
    auto& registry = GroupRegistry::instance();
    const Transport transport = registry.transport_for(op, device.type(), tag_);
    slot = observed(options_.size == 1 && !transport.forced
                        ? make_solo_communicator()
                        : form_communicator(op, transport, rendezvous),
                    identity(device), timeout());
    if (device.is_cpu()) {
      point_to_point_.observe_with(observer_of(slot));  // messages sit beside the collectives
    }
    // The functional ops called with this group find this communicator under the group's tag.
    registry.register_communicator(device.type(), tag_, options_.members, slot);
  }
  TORCH_CHECK(!slot->failed(), kPrefix, describe(op), ": the group is unusable after an earlier ",
              "failure (", slot->failure().value_or(""), "); its members are out of step. Create ",
              "a new group");
  return slot;
}

GroupIdentity FuncBackend::identity(c10::Device device) const {
  GroupIdentity identity;
  // torch's name for the group, so that its entries sit beside those of torch's backends; a
  // device other than the CPU has its own sequence of collectives, under a name of its own.
  identity.name = device.is_cpu() ? options_.name : options_.name + "/" + shared_device(device);
  identity.description = kName;
  identity.members = options_.members;
  identity.rank = options_.rank;
  identity.store = options_.store;
  return identity;
}

void FuncBackend::adopt(c10::Device device, std::shared_ptr<Communicator> communicator) {
  communicator = observed(std::move(communicator), identity(device), timeout());
  std::lock_guard<std::mutex> lock(mutex_);
  communicators_[{static_cast<int>(device.type()), device.is_cpu() ? -1 : device.index()}] =
      communicator;
  GroupRegistry::instance().register_communicator(device.type(), tag_, options_.members,
                                                  std::move(communicator));
}

std::vector<std::pair<c10::Device, std::shared_ptr<Communicator>>> FuncBackend::communicators() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<c10::Device, std::shared_ptr<Communicator>>> formed;
  for (const auto& [key, communicator] : communicators_) {
    if (communicator) {
      formed.emplace_back(c10::Device(static_cast<c10::DeviceType>(key.first),
                                      static_cast<c10::DeviceIndex>(key.second)),
                          communicator);
    }
  }
  return formed;
}

c10::intrusive_ptr<c10d::Work> FuncBackend::work(
    c10d::OpType type, std::string_view op, const std::shared_ptr<Communicator>& communicator,
    Completion done, std::vector<at::Tensor> outputs, std::chrono::milliseconds op_timeout,
    std::shared_ptr<const std::atomic<int>> source_rank) {
  // Messages (no communicator) involve two members only: they do not count.
  const uint64_t sequence = communicator ? issued_.fetch_add(1, std::memory_order_relaxed) : 0;
  if (op_timeout != c10d::kUnsetTimeout && communicator && done->devices().empty()) {
    OpDeadline deadline;
    deadline.timeout = op_timeout;
    deadline.what = describe(op);
    deadline.roll_call.store = own_store("c10d_func/op_timeouts/");
    deadline.roll_call.rank = options_.rank;
    deadline.roll_call.size = options_.size;
    deadline.roll_call.members = options_.members;
    deadline.roll_call.timeout = op_timeout;
    deadline.occasion = std::to_string(sequence);
    deadline.communicator = communicator;
    done = bounded_by(done, std::move(deadline));
  }
  return c10::make_intrusive<FuncWork>(type, op, group_, communicator, done, std::move(outputs),
                                       std::move(source_rank));
}

void FuncBackend::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() > 0, kPrefix, "set_timeout: the timeout must be positive, got ",
              timeout.count(), " ms");
  timeout_ms_.store(timeout.count());
  // Formed communicators bound their next collectives by it; later ones form with it.
  for (auto& [device, communicator] : communicators()) {
    communicator->set_timeout(timeout);
  }
  point_to_point_.set_timeout(timeout);
}

at::Tensor FuncBackend::allocateTensor(long size, at::TensorOptions options) {
  TORCH_CHECK(size >= 0, kPrefix, "allocate_tensor: the size must be non-negative, got ", size);
  TORCH_CHECK(options.device().is_cpu(), kPrefix,
              "allocate_tensor serves CPU tensors (symmetric host memory), not ", options.device(),
              "; supports_tensor_alloc says so for a device with an index");
  return communicator(options.device(), "allocate_tensor")->new_symmetric({size}, options);
}

c10::intrusive_ptr<c10d::Backend::Options> FuncBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>();
  options->timeout = timeout();
  options->group_name = options_.name;
  options->group_desc = getGroupDesc();
  options->global_ranks_in_group.assign(options_.members.begin(), options_.members.end());
  std::ostringstream transport;
  for (const auto& [device, communicator] : communicators()) {
    transport << (transport.tellp() > 0 ? "," : "") << device.type() << ":"
              << communicator->backend_name();
  }
  options->transport = transport.str();
  return options;
}

c10::intrusive_ptr<c10d::Store> FuncBackend::own_store(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!own_connection_) {
    own_connection_ = private_connection(options_.store);
  }
  return c10::make_intrusive<c10d::PrefixStore>(prefix, own_connection_);
}

c10::intrusive_ptr<c10d::Backend> FuncBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  for (int rank : ranks) {
    TORCH_CHECK(rank >= 0 && rank < options_.size, kPrefix, "split: rank ", rank,
                " is not a rank of process group '", options_.name, "' (its ranks are 0..",
                options_.size - 1, ")");
  }
  const std::string part = format_ranks(std::vector<int64_t>(ranks.begin(), ranks.end()));
  const std::string name =
      opts && !opts->group_name.empty() ? opts->group_name : options_.name + ":split:" + part;
  return derive(store, "split " + name + " " + part,
                [&] { return split_once(store, ranks, opts, name); });
}

c10::intrusive_ptr<c10d::Backend> FuncBackend::split_once(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts, const std::string& name) {
  const auto mine = std::find(ranks.begin(), ranks.end(), static_cast<int>(options_.rank));
  if (mine == ranks.end()) {
    split_device_communicators(*this, nullptr, -1, 0);
    return nullptr;
  }
  FuncBackendOptions child;
  child.store = store;
  child.rank = mine - ranks.begin();
  child.size = static_cast<int64_t>(ranks.size());
  child.timeout = opts ? opts->timeout : timeout();
  child.name = name;
  for (int rank : ranks) {
    child.members.push_back(options_.members[rank]);
  }
  auto backend = c10::make_intrusive<FuncBackend>(std::move(child));
  // Disjoint parts have distinct smallest ranks: the part's color on every member.
  split_device_communicators(*this, backend.get(), *std::min_element(ranks.begin(), ranks.end()),
                             mine - ranks.begin());
  return backend;
}

c10::intrusive_ptr<c10d::Backend> FuncBackend::merge(
    const c10::intrusive_ptr<c10d::Store>& store,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts, const int& rank, const int& size) {
  FuncBackendOptions merged;
  merged.store = store;
  merged.rank = rank;
  merged.size = size;
  merged.timeout = opts ? opts->timeout : timeout();
  merged.name = opts && !opts->group_name.empty() ? opts->group_name : options_.name + ":merge";
  // The merged group's members are numbered by the store that merges them, not by this world.
  for (int r = 0; r < size; ++r) {
    merged.members.push_back(r);
  }
  const std::string key =
      "merge " + merged.name + " rank " + std::to_string(rank) + " of " + std::to_string(size);
  return derive(store, key, [&] { return c10::make_intrusive<FuncBackend>(std::move(merged)); });
}

c10::intrusive_ptr<c10d::Backend> FuncBackend::derive(
    const c10::intrusive_ptr<c10d::Store>& store, const std::string& key,
    const std::function<c10::intrusive_ptr<c10d::Backend>()>& make) {
  std::lock_guard<std::mutex> lock(derive_mutex_);
  if (last_derived_.store == store && last_derived_.key == key) {
    if (!last_derived_.backend) {
      return nullptr;  // this member is in no part
    }
    if (auto alive = last_derived_.backend->lock()) {
      return alive;
    }
  }
  auto made = make();
  last_derived_ = Derived{store, key, std::nullopt};
  if (made) {
    last_derived_.backend.emplace(made);
  }
  return made;
}

void FuncBackend::perform_nocolor_split(c10::Device device) {
  for (auto& [formed, communicator] : communicators()) {
    if (formed == device) {
      (void)communicator->split(-1, 0);
    }
  }
}

void FuncBackend::eagerConnectSingleDevice(at::Device device) {
  (void)communicator(device, "eager_connect_single_device");
}

void FuncBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? this->timeout() : opts.timeout;
  // Zero is Gloo's too: rank 0 then finds every member that has not arrived yet timed out.
  TORCH_CHECK(timeout.count() >= 0, kPrefix,
              "monitored_barrier: the timeout must not be negative, got ", timeout.count(), " ms");
  const uint64_t call = monitored_barriers_.fetch_add(1);
  monitored_barrier(own_store("c10d_func/monitored_barrier/" + std::to_string(call) + "/"),
                    options_.rank, options_.members, timeout, this->timeout(), waitAllRanks);
}

void split_device_communicators(FuncBackend& parent, FuncBackend* child, int64_t color,
                                int64_t key) {
  for (auto& [device, communicator] : parent.communicators()) {
    if (device.is_cpu()) {
      continue;  // the child formed its own among its members (shm and Gloo cannot split)
    }
    auto part = communicator->split(child ? color : -1, key);
    if (child && part) {
      child->adopt(device, std::move(part));
    }
  }
}

FuncBackend* as_func_backend(const c10::intrusive_ptr<c10d::Backend>& backend) {
  return dynamic_cast<FuncBackend*>(backend.get());
}

}  // namespace c10d_func
