// send/recv over two-member channels; see point_to_point.h.
#include "runtime/point_to_point.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "runtime/group_registry.h"
#include "runtime/store_connections.h"
#include "transports/call_scope.h"
#include "transports/rendezvous.h"
#include "transports/shm/shm_communicator.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

namespace c10d_func {

struct PointToPoint::Channel {
  // Who meets whom: fixed when the channel is made. The sender is index 0 of the channel; this
  // process only ever sends on it or only ever receives.
  Rendezvous rendezvous;  // without a store until formed
  c10::intrusive_ptr<c10d::Store> group_store;
  std::string prefix;
  bool sending = false;
  // The group's receivers may take messages from any source, which counting sends serves
  // (any_source.h): that needs a send to complete only once its receiver has taken it.
  bool sends_counted = false;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> tasks;
  bool stopping = false;
  bool running = false;  // a task is out of `tasks` and not finished
  // Set once, under `mutex`, by the channel's thread, which reads it freely from then on; other
  // threads read it under `mutex` (a CPU message posted while the channel is idle is issued by
  // its caller on it: see enqueue).
  std::shared_ptr<Communicator> communicator;
  // Touched by the channel's thread only.
  std::optional<std::string> formation_error;

  // How many messages the sender has issued on the channel, where its communicator shows that
  // without communicating (formed on shared memory): its sender then publishes no count to the
  // store for them (any_source.h). Either end may ask; nullopt before forming and elsewhere.
  std::optional<int64_t> sender_issued() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!communicator) {
      return std::nullopt;
    }
    const std::optional<uint64_t> issued = communicator->issued_by(/*member=*/0);
    if (!issued) {
      return std::nullopt;
    }
    // The sender writes it: bounded to a count (a wrong one posts a recv its timeout bounds).
    return static_cast<int64_t>(
        std::min<uint64_t>(*issued, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  }
  // Messages this process has posted on the channel (guarded by PointToPoint::mutex_).
  int64_t posted = 0;

  // On the channel's thread, before its first message.
  void form() {
    try {
      const char* op = sending ? "send" : "recv";
      // A connection of its own: the channel's thread blocks on it while forming, and a TCPStore
      // client serves one request at a time (see store_connections.h).
      Rendezvous at_store = rendezvous;
      at_store.store =
          c10::make_intrusive<c10d::PrefixStore>(prefix, private_connection(group_store));
      auto transport = GroupRegistry::instance().transport_for(op, rendezvous.device.type(), "");
      if (sends_counted && transport.name == "auto") {
        transport.factory = receipt_completing_factory(op);
      }
      auto formed = form_communicator(op, transport, at_store);
      std::lock_guard<std::mutex> lock(mutex);
      communicator = std::move(formed);
    } catch (const std::exception& error) {
      formation_error = error.what();
    }
  }

  // The default CPU transport's choice, but Gloo between hosts: shm and Gloo complete a send only
  // once its receiver has joined it, which counting sends relies on (a message taken as it came
  // needs no count), where the hosts' link ("link+gloo") hands a small message to the socket and
  // completes, so its count would never be published and a recv from any source would wait for
  // it until the timeout.
  static CommunicatorFactory receipt_completing_factory(const char* op) {
    CommunicatorFactory gloo =
        GroupRegistry::instance().find_transport(op, c10::DeviceType::CPU, "gloo").factory;
    return [gloo = std::move(gloo)](const Rendezvous& pair) -> std::shared_ptr<Communicator> {
      const auto hosts = exchange_host_identities(pair);
      if (hosts.front() == hosts.back()) {
        return form_shm_communicator(pair.under("shm/"));
      }
      return gloo(pair.under("across/"));
    };
  }

  void run() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [this] { return stopping || !tasks.empty(); });
        if (tasks.empty()) {
          return;  // stopping, and nothing left to deliver
        }
        task = std::move(tasks.front());
        tasks.pop_front();
        running = true;
      }
      task();
      task = nullptr;
      std::lock_guard<std::mutex> lock(mutex);
      running = false;
    }
  }
};

PointToPoint::PointToPoint(c10::intrusive_ptr<c10d::Store> store, int64_t rank,
                           std::vector<int64_t> members, std::chrono::milliseconds timeout,
                           std::string group, AnySource any_source)
    : store_(std::move(store)),
      rank_(rank),
      members_(std::move(members)),
      timeout_(timeout),
      group_(std::move(group)),
      any_source_mode_(any_source) {
  if (any_source == AnySource::kCounted) {
    sent_counts_ = std::make_unique<SentCounts>(store_, rank_);
  }
}

PointToPoint::~PointToPoint() {
  // First, so that no recv from any source makes a channel after the loop below.
  any_source_.reset();
  // Channels finish what was posted on their own threads, which own them from here on: joining
  // could block on a peer that never comes.
  for (auto& [key, channel] : channels_) {
    std::lock_guard<std::mutex> lock(channel->mutex);
    channel->stopping = true;
    channel->wake.notify_all();
  }
}

Completion PointToPoint::send(const at::Tensor& tensor, int64_t peer, int64_t tag) {
  return observed_post(tensor, rank_, peer, tag);
}

Completion PointToPoint::recv(const at::Tensor& tensor, int64_t peer, int64_t tag) {
  return observed_post(tensor, peer, rank_, tag);
}

Completion PointToPoint::recv_any(const at::Tensor& tensor, int64_t tag,
                                  std::shared_ptr<std::atomic<int>> source) {
  TORCH_CHECK(sent_counts_, "recv from any source on ", group_,
              ": this member was started with C10D_FUNC_ANNOUNCE_SENDS=0, so the group's members "
              "do not count their sends (set it on no member to receive from any source)");
  TORCH_CHECK(tensor.device().is_cpu(), "recv from any source on ", group_,
              " takes a CPU tensor (got one on ", tensor.device(),
              "); as with NCCL, a CUDA recv names its source");
  auto wait = [&] {
    AnySourceWaiter* waiter = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!any_source_) {
        any_source_ = std::make_unique<AnySourceWaiter>(
            store_, rank_, static_cast<int64_t>(members_.size()), group_,
            [this](int64_t tag, const std::vector<int64_t>& sent_counts, const at::Tensor& tensor,
                   int64_t& source) { return take_announced(tag, sent_counts, tensor, source); },
            [this](int64_t tag) { return shown_counts(tag); });
      }
      waiter = any_source_.get();
    }
    // Outside mutex_: the waiter's thread holds its own lock while it calls take_announced.
    return waiter->wait_for(tensor, tag, std::move(source), timeout_.get());
  };
  if (!observer_) {
    return wait();
  }
  // torch's name for it (Gloo's "gloo:recvAnySource"); a message with no peer yet.
  return observer_->observe({"c10d_func", "recvAnySource", tensor, tensor, -1}, wait);
}

std::optional<Completion> PointToPoint::take_announced(int64_t tag,
                                                       const std::vector<int64_t>& sent_counts,
                                                       const at::Tensor& tensor, int64_t& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (source >= 0) {  // a recv naming its sender, queued behind recvs from any source
    return enqueue(*channel_for(source, rank_, tag, tensor.device()), tensor, tensor.contiguous());
  }
  const auto size = static_cast<int64_t>(members_.size());
  // Starts after the member taken last, so that one busy sender cannot starve the others.
  int64_t& start = next_any_source_[tag];
  for (int64_t step = 0; step < size; ++step) {
    const int64_t sender = (start + step) % size;
    if (sender == rank_ || sent_counts.at(sender) <= 0) {
      continue;
    }
    auto channel = channel_for(sender, rank_, tag, tensor.device());
    if (sent_counts[sender] > channel->posted) {
      start = sender + 1;
      source = sender;
      return enqueue(*channel, tensor, tensor.contiguous());
    }
  }
  return std::nullopt;
}

std::vector<int64_t> PointToPoint::shown_counts(int64_t tag) {
  std::vector<int64_t> counts(members_.size(), -1);
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t sender = 0; sender < members_.size(); ++sender) {
    // Only channels made already: a sender's first message is learnt from the store.
    auto found = channels_.find(
        {static_cast<int64_t>(sender), rank_, tag, static_cast<int>(c10::DeviceType::CPU), -1});
    if (found != channels_.end()) {
      counts[sender] = found->second->sender_issued().value_or(-1);
    }
  }
  return counts;
}

Completion PointToPoint::observed_post(const at::Tensor& tensor, int64_t sender, int64_t receiver,
                                       int64_t tag) {
  if (!observer_) {
    return post(tensor, sender, receiver, tag);
  }
  const bool sending = sender == rank_;
  // The channel's transport is known only once its thread has formed it.
  return observer_->observe(
      {"c10d_func", sending ? "send" : "recv", tensor, tensor, sending ? receiver : sender},
      [&] { return post(tensor, sender, receiver, tag); });
}

void PointToPoint::set_timeout(std::chrono::milliseconds timeout) {
  timeout_.set(timeout);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [key, channel] : channels_) {
    {
      // A channel's rendezvous and communicator belong to its thread: the change is a task
      // there, so it applies to the messages posted after this call.
      std::lock_guard<std::mutex> channel_lock(channel->mutex);
      channel->tasks.push_back([channel = channel.get(), timeout] {
        channel->rendezvous.timeout = timeout;
        if (channel->communicator) {
          channel->communicator->set_timeout(timeout);
        }
      });
    }
    channel->wake.notify_one();
  }
}

Completion PointToPoint::post(const at::Tensor& tensor, int64_t sender, int64_t receiver,
                              int64_t tag) {
  if (receiver == rank_ && tensor.device().is_cpu()) {
    AnySourceWaiter* waiter = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      waiter = any_source_.get();
    }
    // Outside mutex_, as in recv_any. A recv of this tag from any source posted before this one
    // still waits: this one queues behind it, in the order Gloo matches them.
    if (waiter) {
      if (auto queued = waiter->wait_behind_any_source(tensor, tag, sender)) {
        return *queued;
      }
    }
  }
  // A message is a broadcast from the sender (index 0 of the channel) to the receiver, of a
  // contiguous buffer (made before taking the lock: it may copy).
  at::Tensor buffer = tensor.contiguous();
  std::lock_guard<std::mutex> lock(mutex_);
  auto channel = channel_for(sender, receiver, tag, tensor.device());
  Completion done = enqueue(*channel, tensor, std::move(buffer));
  if (sent_counts_ && sender == rank_ && tensor.device().is_cpu()) {
    sent_counts_->sent(receiver, tag, done,
                       /*shown_by_channel=*/channel->sender_issued().has_value());
  }
  return done;
}

std::shared_ptr<PointToPoint::Channel> PointToPoint::channel_for(int64_t sender, int64_t receiver,
                                                                 int64_t tag, c10::Device device) {
  auto& slot = channels_[{sender, receiver, tag, static_cast<int>(device.type()),
                          static_cast<int>(device.index())}];
  if (!slot) {
    slot = std::make_shared<Channel>();
    Rendezvous& rendezvous = slot->rendezvous;
    rendezvous.rank = sender == rank_ ? 0 : 1;
    rendezvous.size = 2;
    rendezvous.members = {members_.at(sender), members_.at(receiver)};
    rendezvous.group = group_ + ", messages rank " + std::to_string(rendezvous.members[0]) +
                       " -> rank " + std::to_string(rendezvous.members[1]) + " tag " +
                       std::to_string(tag);
    rendezvous.timeout = timeout_.get();
    rendezvous.device = device;
    std::ostringstream prefix;
    prefix << "c10d_func/p2p/" << sender << "->" << receiver << "/" << tag << "/"
           << shared_device(device) << "/";
    slot->prefix = prefix.str();
    slot->group_store = store_;
    slot->sending = sender == rank_;
    slot->sends_counted = any_source_mode_ != AnySource::kNever && device.is_cpu();
    std::thread([channel = slot] { channel->run(); }).detach();
  }
  return slot;
}

Completion PointToPoint::enqueue(Channel& target, const at::Tensor& tensor, at::Tensor buffer) {
  target.posted += 1;
  const c10::Device device = tensor.device();
  if (device.is_cpu()) {
    std::unique_lock<std::mutex> lock(target.mutex);
    if (target.communicator && target.tasks.empty() && !target.running) {
      // Idle and formed: the caller issues the message itself, which saves the two hand-offs
      // between threads a message through the channel's thread costs on each side (most of a
      // small message's time). Safe because a communicator's calls return at once (an exchange
      // of sends before recvs cannot block here), and in order: everything posted before was
      // issued already (nothing is queued or running), and what comes later is posted under
      // PointToPoint::mutex_, held here. The caller's wait then runs the transfer where the
      // transport leaves it to its waiter.
      try {
        std::shared_ptr<Communicator> communicator = target.communicator;
        Completion moved = communicator->broadcast(buffer, /*root=*/0);
        lock.unlock();
        // The finishing step holds the tensors and the communicator until the message is done,
        // as the channel's task would, and lets go of them before the caller is woken (see the
        // task below for why that matters at exit).
        const bool copy_out = !target.sending && !buffer.is_same(tensor);
        return then_run(moved, tensor, {buffer},
                        [tensor, buffer, communicator = std::move(communicator), copy_out] {
                          if (copy_out) {
                            tensor.copy_(buffer);
                          }
                        });
      } catch (const std::exception&) {
        auto failed = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
        failed->setError(std::current_exception());
        return failed;
      }
    }
  }
  std::vector<c10::Device> devices;
  std::optional<c10::Stream> caller_stream;
  if (!device.is_cpu()) {
    devices.push_back(device);
    caller_stream = c10::impl::VirtualGuardImpl(device.type()).getStream(device);
  }
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get(), devices);

  // Copies of the tensors the task can let go of (init-captures: not const).
  auto task = [channel = &target, done, tensor = at::Tensor(tensor), buffer = std::move(buffer),
               caller_stream]() mutable {
    // The message is ordered after the caller's work on its stream, and completes on it.
    std::optional<c10::StreamGuard> on_caller_stream;
    if (caller_stream) {
      on_caller_stream.emplace(*caller_stream);
    }
    std::exception_ptr failure;
    std::vector<c10::ivalue::Future::WeakStorage> storages;
    try {
      if (!channel->communicator && !channel->formation_error) {
        channel->form();
      }
      TORCH_CHECK(!channel->formation_error, *channel->formation_error);
      Completion moved = channel->communicator->broadcast(buffer, /*root=*/0);
      // CPU: until delivered (running its deferred wait, if the transport left one to the
      // waiter); CUDA: the caller's stream waits on the transfer.
      wait_completion(moved);
      if (moved->hasError()) {
        failure = moved->exception_ptr();
      } else {
        if (!channel->sending && !buffer.is_same(tensor)) {
          tensor.copy_(buffer);
        }
        // With the tensor's storage, a device Future records its event (on the caller's
        // stream, current here): a waiter on another stream is then ordered after it too.
        storages.push_back(tensor.storage().getWeakStorageImpl());
      }
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
    // This thread lets go of the caller's tensors while the caller still waits. Letting go of a
    // tensor Python also holds takes the GIL (torch's PyObject preservation); after the wait
    // returns, the caller may be shutting Python down, and a thread taking the GIL then is
    // ended by Python mid-destructor, which aborts the process.
    tensor = at::Tensor();
    buffer = at::Tensor();
    if (failure) {
      done->setError(failure);
    } else {
      done->markCompleted(c10::IValue(), storages);
    }
  };
  {
    std::lock_guard<std::mutex> lock(target.mutex);
    // Under the message's name where a profiler records (call_scope.h): the profiler sees the
    // message where it runs, on this thread, as it sees one its caller issued.
    target.tasks.push_back(profiled(std::move(task)));
  }
  target.wake.notify_one();
  return done;
}

}  // namespace c10d_func
