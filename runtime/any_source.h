#pragma once
// Receiving from any source (torch's recvAnysource: `dist.recv(t)` with no `src`) over
// channels that exist per (sender, receiver, tag) (point_to_point.h). No transport can tell a
// receiver which channel holds a message, so senders say so in the group's store:
//   - SentCounts, on the sending side, keeps per (receiver, tag) the count of CPU messages this
//     member has sent there, under sent_count_key, and publishes it (a store add, from a thread of
//     its own: a send never waits on the store) only to a receiver that takes messages of that
//     tag from any source, which says so under any_source_wanted_key when it first does. A send
//     completes only once its receiver has joined it (every CPU transport's two-member
//     broadcast), and one taken within kUnclaimedAfter needed no count: the thread looks for the
//     receiver's key only once a message has waited that long, and then
//     at growing gaps up to kLookForAnySourceEvery while it waits; once it has seen the key, it
//     publishes every message to that receiver on that tag as soon as it is posted. Messages to
//     receivers that always name their sender cost a few looks per message left waiting, only while
//     some wait. A count published late is never ahead of the messages sent, and a stale one is
//     never above them: a receiver takes a channel only when its count is ahead of what it has
//     received there.
//   - AnySourceWaiter, on the receiving side, polls the counts of every other member for the tag
//     of each waiting recv, and hands the first member whose count is ahead of the messages
//     this member has posted on that member's channel to `match`, which posts the recv there.
//   - A channel formed on shared memory shows its sender's count itself (the collectives the
//     sender issued on it, in its control block: Communicator::issued_by). Its sender publishes
//     no count for the messages it posts there once formed, and the waiter takes the larger of
//     the store's count and the shown one, which it reads every turn between the polls (loads
//     from shared memory, not a request to the store), and so does the thread that waits a recv,
//     before it blocks (help_when_waited): a recv from any source between processes of one host
//     then waits for no store request once each sender's channel has formed, and is taken by
//     the thread that waits it.
// Counts are read from a store any member can write: each is parsed and bounded before use. A
// shown count is read from memory the sender writes: a wrong one only posts a recv that its
// channel's timeout bounds.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "transports/completion.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10d_func {

// Where `sender`'s count of CPU messages to `receiver` on `tag` is kept (group-local ranks).
std::string sent_count_key(int64_t sender, int64_t receiver, int64_t tag);
// Set by `receiver`'s first recv from any source on `tag`, before it reads the counts: a sender
// publishes its counts to that receiver on that tag once it has seen it.
std::string any_source_wanted_key(int64_t receiver, int64_t tag);

// A count as the store holds it (a decimal the store's add wrote); raises, naming `sender`, on
// anything else.
int64_t parse_sent_count(const std::vector<uint8_t>& value, int64_t sender);

class SentCounts {
 public:
  // How long a message may wait for its receiver before the thread first looks whether that
  // receiver takes messages of its tag from any source (one store request).
  static constexpr std::chrono::microseconds kUnclaimedAfter{250};
  // While messages to the receiver still wait, the thread looks again after kFirstLookGap, then
  // after gaps four times longer each, up to kLookForAnySourceEvery: the longest a first recv from
  // any source can wait for a message sent before it began (one that came 2 ms late waits about
  // as long again), at a few requests per slow receiver. The gaps start over only once no
  // message to it has waited for kLookForAnySourceEvery: a receiver whose messages keep waiting
  // (a pipeline's next stage) is looked at once per kLookForAnySourceEvery, not per message.
  static constexpr std::chrono::microseconds kFirstLookGap{1000};
  static constexpr std::chrono::microseconds kLookForAnySourceEvery{20000};

  SentCounts(c10::intrusive_ptr<c10d::Store> store, int64_t rank);
  // Publishes what is still waiting, then its thread ends (without holding up this one).
  ~SentCounts();
  // A CPU message to `receiver` on `tag` was posted; `done` completes once it is received.
  // `shown_by_channel`: its channel shows the receiver its count (formed on shared memory), so
  // it is not published.
  void sent(int64_t receiver, int64_t tag, const Completion& done, bool shown_by_channel = false);

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  struct State;
  std::shared_ptr<State> state_;
};

class AnySourceWaiter {
 public:
  // Tries to take a message of `tag` for `tensor`, given every member's count of messages sent
  // to this member on `tag` (-1 for this member itself): posts the recv on the channel of the
  // member it picks and returns its Completion, setting `source`; nullopt when no count is ahead.
  // A `source` of 0 or more on entry is a recv naming that member (wait_behind_any_source): it is
  // posted on that member's channel whatever the counts (`sent_counts` is then empty).
  using Match =
      std::function<std::optional<Completion>(int64_t tag, const std::vector<int64_t>& sent_counts,
                                              const at::Tensor& tensor, int64_t& source)>;

  // Every member's count of messages to this member on `tag` that a formed channel shows
  // without the store (shared memory), -1 where none does; called once per turn, under the
  // waiter's lock as Match is.
  using Shown = std::function<std::vector<int64_t>(int64_t tag)>;

  AnySourceWaiter(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t size,
                  std::string group, Match match, Shown shown = {});
  // Waiting recvs fail (their group is gone); the thread ends without holding up this one.
  ~AnySourceWaiter();

  // Done once the message has arrived in `tensor`; `source` holds its sender before then. Recvs
  // of one tag take messages in the order they were posted; past `timeout` one fails.
  Completion wait_for(const at::Tensor& tensor, int64_t tag,
                      std::shared_ptr<std::atomic<int>> source, std::chrono::milliseconds timeout);
  // A CPU recv naming `sender`, posted while recvs from any source of `tag` still wait here:
  // Gloo matches the recvs of a tag in the order posted, so one from any source posted first
  // takes `sender`'s next message if that comes first. This one therefore queues behind them and
  // is posted on its channel (through `match`) once every earlier recv of its tag has taken a
  // message or failed; its channel bounds it from then on. nullopt when no recv of `tag` waits:
  // the caller posts it on its channel itself.
  std::optional<Completion> wait_behind_any_source(const at::Tensor& tensor, int64_t tag,
                                                   int64_t sender);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace c10d_func
