// send/recv over two-member channels; see point_to_point.h.
#include "runtime/point_to_point.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "runtime/group_registry.h"
#include "runtime/store_connections.h"
#include "transports/rendezvous.h"

#include <condition_variable>
#include <deque>
#include <functional>
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

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> tasks;
  bool stopping = false;
  // Touched by the channel's thread only.
  std::shared_ptr<Communicator> communicator;
  std::optional<std::string> formation_error;

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
      communicator = form_communicator(op, transport, at_store);
    } catch (const std::exception& error) {
      formation_error = error.what();
    }
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
      }
      task();
    }
  }
};

PointToPoint::PointToPoint(c10::intrusive_ptr<c10d::Store> store, int64_t rank,
                           std::vector<int64_t> members, std::chrono::milliseconds timeout,
                           std::string group)
    : store_(std::move(store)),
      rank_(rank),
      members_(std::move(members)),
      timeout_(timeout),
      group_(std::move(group)) {}

PointToPoint::~PointToPoint() {
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
  const c10::Device device = tensor.device();
  std::shared_ptr<Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
      std::thread([channel = slot] { channel->run(); }).detach();
    }
    channel = slot;
  }

  std::vector<c10::Device> devices;
  std::optional<c10::Stream> caller_stream;
  if (!device.is_cpu()) {
    devices.push_back(device);
    caller_stream = c10::impl::VirtualGuardImpl(device.type()).getStream(device);
  }
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get(), devices);
  // A message is a broadcast from the sender (index 0 of the channel) to the receiver.
  const at::Tensor buffer = tensor.contiguous();

  auto task = [channel = channel.get(), done, tensor, buffer, caller_stream] {
    try {
      // The message is ordered after the caller's work on its stream, and completes on it.
      std::optional<c10::StreamGuard> on_caller_stream;
      if (caller_stream) {
        on_caller_stream.emplace(*caller_stream);
      }
      if (!channel->communicator && !channel->formation_error) {
        channel->form();
      }
      TORCH_CHECK(!channel->formation_error, *channel->formation_error);
      Completion moved = channel->communicator->broadcast(buffer, /*root=*/0);
      // CPU: until delivered (running its deferred wait, if the transport left one to the
      // waiter); CUDA: the caller's stream waits on the transfer.
      wait_completion(moved);
      if (moved->hasError()) {
        done->setError(moved->exception_ptr());
        return;
      }
      if (!channel->sending && !buffer.is_same(tensor)) {
        tensor.copy_(buffer);
      }
      // With the tensor's storage, a device Future records its event (on the caller's stream,
      // current here): a waiter on another stream is then ordered after the message too.
      done->markCompleted(c10::IValue(), std::vector<c10::ivalue::Future::WeakStorage>{
                                             tensor.storage().getWeakStorageImpl()});
    } catch (const std::exception&) {
      done->setError(std::current_exception());
    }
  };
  {
    std::lock_guard<std::mutex> lock(channel->mutex);
    channel->tasks.push_back(std::move(task));
  }
  channel->wake.notify_one();
  return done;
}

}  // namespace c10d_func
