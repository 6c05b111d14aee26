#pragma once
// send/recv for the c10d_func backend. The transports are collective-only, so a message travels
// as a broadcast on a two-member communicator of its own: one per (sender, receiver, tag, device),
// made on first use by those two members alone (shm on one host, Gloo across hosts, NCCL on
// CUDA). Messages of one channel arrive in the order they were sent, as torch's p2p promises.
//
// A receive from any source (recv_any) learns which channel holds a message from the senders'
// counts in the group's store (any_source.h), kept for CPU messages when the group announces
// its sends.
//
// Each channel has its own thread, which forms the communicator and issues the channel's
// messages in order. Forming needs both ends, and an exchange (A sends to B while B sends to A,
// then both receive) forms two channels at once; doing that on the caller's thread would leave
// A waiting for B on channel A->B while B waits for A on B->A. Once formed, a CPU message posted
// while its channel is idle is issued by the caller instead (a communicator's calls return at
// once, so that cannot block), which saves the two hand-offs between threads a side that most of
// a small message's time went to.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/any_source.h"
#include "runtime/group_observer.h"
#include "transports/communicator.h"
#include "transports/shared_timeout.h"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace c10d_func {

// Whether a group's receivers may take messages from any source (recv_any).
enum class AnySource {
  kNever,    // every recv names its source (c10d_func's functional irecv)
  kRefused,  // possible on the group, but this member counts no sends (C10D_FUNC_ANNOUNCE_SENDS=0):
             // recv_any raises; its channels form as with kCounted, so that members agree
  kCounted,  // each CPU message sent is counted in the store, so that recv_any works
};

class PointToPoint {
 public:
  // `store` is private to the owning group; `members` are its global ranks (for messages).
  // Unless `any_source` is kNever, CPU channels between hosts run on Gloo (see Channel::form).
  PointToPoint(c10::intrusive_ptr<c10d::Store> store, int64_t rank, std::vector<int64_t> members,
               std::chrono::milliseconds timeout, std::string group, AnySource any_source);
  ~PointToPoint();

  // `tensor` is sent to group member `peer` (send) or written with what `peer` sent (recv).
  // The Completion is done once the message has left (send) or arrived (recv).
  Completion send(const at::Tensor& tensor, int64_t peer, int64_t tag);
  Completion recv(const at::Tensor& tensor, int64_t peer, int64_t tag);
  // Receives a CPU `tensor` from whichever member's message on `tag` is announced first (those
  // of one member in the order sent); `source` holds that member before the Completion is done.
  // Needs AnySource::kCounted on every member.
  Completion recv_any(const at::Tensor& tensor, int64_t tag,
                      std::shared_ptr<std::atomic<int>> source);
  // Bounds the messages posted from now on, on every channel (formed or not).
  void set_timeout(std::chrono::milliseconds timeout);
  // Shows every message from now on to torch's tools as one of `observer`'s group (set once,
  // before the first message).
  void observe_with(std::shared_ptr<GroupObserver> observer) { observer_ = std::move(observer); }

 private:
  struct Channel;
  Completion post(const at::Tensor& tensor, int64_t sender, int64_t receiver, int64_t tag);
  // With mutex_ held: the channel, made (and its thread started) on first use.
  std::shared_ptr<Channel> channel_for(int64_t sender, int64_t receiver, int64_t tag,
                                       c10::Device device);
  // With mutex_ held: the message of `tensor` (moved as `buffer`, tensor.contiguous()) goes to
  // the end of `channel`'s queue.
  Completion enqueue(Channel& channel, const at::Tensor& tensor, at::Tensor buffer);
  // AnySourceWaiter's Match: posts the recv on the first channel whose count is ahead (or, for a
  // recv that named its sender and queued behind recvs from any source, on that sender's).
  std::optional<Completion> take_announced(int64_t tag, const std::vector<int64_t>& sent_counts,
                                           const at::Tensor& tensor, int64_t& source);
  // AnySourceWaiter's Shown: per member, the messages its formed CPU channel to this member on
  // `tag` shows it issued (shared memory), -1 where none shows a count.
  std::vector<int64_t> shown_counts(int64_t tag);
  Completion observed_post(const at::Tensor& tensor, int64_t sender, int64_t receiver, int64_t tag);

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_;
  std::vector<int64_t> members_;
  SharedTimeout timeout_;
  std::string group_;
  std::shared_ptr<GroupObserver> observer_;
  std::mutex mutex_;
  // (sender, receiver, tag, device type, device index)
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, std::shared_ptr<Channel>> channels_;
  std::map<int64_t, int64_t> next_any_source_;  // per tag: where take_announced starts looking
  AnySource any_source_mode_;
  std::unique_ptr<SentCounts> sent_counts_;  // with AnySource::kCounted
  // Made by the first recv_any. Declared last: destroyed first, so its thread stops calling
  // take_announced before the channels go.
  std::unique_ptr<AnySourceWaiter> any_source_;
};

}  // namespace c10d_func
