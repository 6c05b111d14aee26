// Receiving from any source through counts in the store; see any_source.h.
#include "runtime/any_source.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "runtime/store_connections.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace c10d_func {

std::string sent_count_key(int64_t sender, int64_t receiver, int64_t tag) {
  return "c10d_func/p2p/sent/" + std::to_string(sender) + "->" + std::to_string(receiver) + "/" +
         std::to_string(tag);
}

std::string any_source_wanted_key(int64_t receiver, int64_t tag) {
  return "c10d_func/p2p/any_source/" + std::to_string(receiver) + "/" + std::to_string(tag);
}

int64_t parse_sent_count(const std::vector<uint8_t>& value, int64_t sender) {
  // The store's add writes a plain decimal; 19 digits hold any int64 count.
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  int64_t count = -1;
  const bool digits_only = !value.empty() && value.size() <= 19 &&
                           std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; });
  if (digits_only) {
    auto [stop, error] = std::from_chars(begin, end, count);
    if (error != std::errc() || stop != end) {
      count = -1;
    }
  }
  if (count < 0) {
    const std::string shown(begin, std::min<size_t>(value.size(), 32));
    TORCH_CHECK(false, "the store's count of messages sent by rank ", sender, " is not a count (",
                value.size(), " bytes: '", shown, value.size() > 32 ? "...'" : "'",
                "); something other than c10d_func wrote it");
  }
  return count;
}

// ---- the sending side ----

struct SentCounts::State {
  // Requests of its own (pooled clients, never the group's store object itself: this may be the
  // last holder at exit, on a detached thread, and must not hold rank 0's store server there).
  c10::intrusive_ptr<c10d::Store> connection;
  int64_t rank;

  // The messages to one receiver on one tag, numbered from 1 in the order posted (their
  // channel delivers them in that order).
  struct Messages {
    int64_t posted = 0;     // the last posted
    int64_t received = 0;   // the last whose send completed (received, or failed)
    int64_t published = 0;  // the count in the store
    // When each message after `received` was posted.
    std::deque<std::chrono::steady_clock::time_point> waiting_since;
    // The receiver takes messages of this tag from any source (its any_source_wanted_key is
    // set): each is published as soon as it is posted, since that receiver waits for the count.
    // Until the thread has seen that, it publishes nothing here and only looks for the key.
    bool eager = false;
    // When the thread may next look for that key.
    std::chrono::steady_clock::time_point next_look{};
    // The gap before the look after next: from kFirstLookGap, four times longer each look, up to
    // kLookForAnySourceEvery; back to the first once no message has waited for that long.
    std::chrono::microseconds look_gap = kFirstLookGap;
    // When the last message that waited was received (none waits since).
    std::chrono::steady_clock::time_point none_waiting_since{};

    // When the thread next has something to do for the oldest message not yet received nor
    // published: publish it (eager), else look for the key once the message has waited
    // kUnclaimedAfter, and then at growing gaps (look_gap) while it waits.
    std::optional<std::chrono::steady_clock::time_point> due() const {
      const int64_t first = std::max(received, published) + 1;
      if (first > posted) {
        return std::nullopt;
      }
      const auto since = waiting_since.at(first - received - 1);
      return eager ? since : std::max(since + kUnclaimedAfter, next_look);
    }
  };

  std::mutex mutex;
  std::condition_variable wake;
  std::map<std::pair<int64_t, int64_t>, Messages> messages;  // (receiver, tag) ->
  bool running = false;
  bool idle = false;  // the thread waits for a message to be posted
  bool stopping = false;
  bool posted_since_turn = false;  // a message was posted since the thread's last turn

  // With `mutex` held: the earliest due time, if any message may need publishing.
  std::optional<std::chrono::steady_clock::time_point> next_due() const {
    std::optional<std::chrono::steady_clock::time_point> earliest;
    for (const auto& [where, of] : messages) {
      if (auto due = of.due(); due && (!earliest || *due < *earliest)) {
        earliest = due;
      }
    }
    return earliest;
  }

  // On the publishing thread, until stopped.
  void run() {
    // With nothing due, the thread looks again every kUnclaimedAfter while messages flow (one
    // was posted within its last kQuietTurns turns): a send then costs no wake-up of this thread.
    // Once none came for that long it waits to be woken by the next send: a program that sends
    // every few milliseconds (a pipeline's stages) would otherwise have it wake 4000 times a
    // second for nothing, on cores its ranks compute on.
    constexpr int kQuietTurns = 2;
    int quiet_turns = 0;
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      auto due = next_due();
      if (!due) {
        if (stopping) {
          return;
        }
        if (posted_since_turn) {
          posted_since_turn = false;
          quiet_turns = 0;
        }
        if (++quiet_turns <= kQuietTurns) {
          wake.wait_for(lock, kUnclaimedAfter);
          continue;
        }
        idle = true;
        wake.wait(lock);
        idle = false;
        quiet_turns = 0;
        continue;
      }
      quiet_turns = 0;
      if (!stopping && std::chrono::steady_clock::now() < *due) {
        wake.wait_until(lock, *due);
        continue;  // what is due may have been received meanwhile
      }
      // Every message due to a receiver from any source (every one when stopping) is
      // published, with the messages posted after it on its channel: one add per channel. For
      // the others, the thread looks whether their receiver has become one.
      std::vector<std::pair<std::string, int64_t>> adds;
      std::vector<std::pair<int64_t, int64_t>> to_look;  // (receiver, tag) not known eager
      const auto now = std::chrono::steady_clock::now();
      for (auto& [where, of] : messages) {
        auto of_due = of.due();
        if (!of_due || (!stopping && *of_due > now)) {
          continue;
        }
        if (of.eager || stopping) {
          adds.emplace_back(sent_count_key(rank, where.first, where.second),
                            of.posted - of.published);
          of.published = of.posted;
        } else {
          of.next_look = now + of.look_gap;
          of.look_gap = std::min(of.look_gap * 4, kLookForAnySourceEvery);
          to_look.push_back(where);
        }
      }
      lock.unlock();
      std::vector<std::pair<int64_t, int64_t>> found_eager;
      try {
        for (const auto& [key, count] : adds) {
          connection->add(key, count);
        }
        // Whether those receivers take messages from any source: then they wait for the counts
        // (published on the next turn, and at once for every later message).
        for (const auto& where : to_look) {
          if (connection->check({any_source_wanted_key(where.first, where.second)})) {
            found_eager.push_back(where);
          }
        }
      } catch (const std::exception&) {
        // The store is gone or failing: every store-backed step of the group fails with it,
        // and a receiver from any source waiting for this count fails at its timeout.
      }
      lock.lock();
      for (const auto& where : found_eager) {
        messages[where].eager = true;
      }
    }
  }

  void received(std::pair<int64_t, int64_t> where) {
    std::lock_guard<std::mutex> lock(mutex);
    Messages& of = messages[where];
    of.received += 1;
    if (!of.waiting_since.empty()) {
      of.waiting_since.pop_front();
    }
    if (of.waiting_since.empty()) {
      of.none_waiting_since = std::chrono::steady_clock::now();
    }
  }
};

SentCounts::SentCounts(c10::intrusive_ptr<c10d::Store> store, int64_t rank)
    : store_(std::move(store)), state_(std::make_shared<State>()) {
  state_->rank = rank;
}

SentCounts::~SentCounts() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->wake.notify_all();
}

void SentCounts::sent(int64_t receiver, int64_t tag, const Completion& done) {
  bool waiting = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    State::Messages& of = state_->messages[{receiver, tag}];
    of.posted += 1;
    state_->posted_since_turn = true;
    // Taken already (its receiver was waiting): counted as received here, where the thread
    // cannot see it posted and not yet received.
    waiting = !done->completed();
    if (waiting) {
      const auto now = std::chrono::steady_clock::now();
      if (of.waiting_since.empty() && now - of.none_waiting_since >= kLookForAnySourceEvery) {
        // The first message left waiting after a quiet spell is looked at quickly again (a recv
        // from any source that came a little after it waits about as long again). While
        // messages keep waiting, as a pipeline's sends wait for the next stage, the looks stay
        // kLookForAnySourceEvery apart: a store request each, which the ranks' cores pay for.
        of.look_gap = kFirstLookGap;
        of.next_look = {};
      }
      of.waiting_since.push_back(now);
    } else {
      of.received += 1;
    }
    if (!state_->running) {
      state_->running = true;
      state_->connection = private_connection(store_);
      // Detached: it may wait on the store, and a count must still reach it after this object
      // is gone (the message it announces is in flight).
      std::thread([state = state_] { state->run(); }).detach();
    } else if (state_->idle || (waiting && of.eager)) {
      state_->wake.notify_one();  // else it wakes by itself when the next message is due
    }
  }
  if (waiting) {
    // Received or failed alike: a failed send's channel takes no more messages.
    done->addCallback([state = state_, where = std::make_pair(receiver, tag)](
                          c10::ivalue::Future&) { state->received(where); });
  }
}

// ---- the receiving side ----

namespace {

struct WaitingRecv {
  at::Tensor tensor;
  int64_t tag;
  std::shared_ptr<std::atomic<int>> source;  // null for a recv naming its sender
  Completion done;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout;
  int64_t named = -1;  // the sender a recv names (queued behind recvs from any source), or -1
};

}  // namespace

struct AnySourceWaiter::State {
  c10::intrusive_ptr<c10d::Store> connection;  // as SentCounts::State's
  int64_t rank;
  int64_t size;
  std::string group;

  std::mutex mutex;
  std::condition_variable wake;
  Match match;  // cleared when the owner goes: called only under `mutex`
  std::deque<WaitingRecv> waiting;
  bool running = false;
  bool stopping = false;
  bool posted_since_poll = false;

  // Touched by the polling thread only.
  std::set<int64_t> tags_with_keys;

  std::string what(int64_t tag) const {
    return "recv from any source (tag " + std::to_string(tag) + ") on " + group;
  }

  // Every member's count of messages to this member on `tag` (-1 at this member).
  std::vector<int64_t> sent_counts(c10d::Store& connection, int64_t tag) {
    std::vector<std::string> keys;
    std::vector<int64_t> senders;
    for (int64_t sender = 0; sender < size; ++sender) {
      if (sender != rank) {
        keys.push_back(sent_count_key(sender, rank, tag));
        senders.push_back(sender);
      }
    }
    if (tags_with_keys.insert(tag).second) {
      // Senders that find this publish their counts to this member on `tag` at once.
      connection.set(any_source_wanted_key(rank, tag), std::vector<uint8_t>{'1'});
      // A count no one has published yet does not exist, and multiGet would wait for it: each
      // is made "0" where missing (compareSet leaves a present value as it is; an add would have
      // the server parse it, and a value that is no number makes it drop the connection).
      for (const auto& key : keys) {
        (void)connection.compareSet(key, std::vector<uint8_t>(), std::vector<uint8_t>{'0'});
      }
    }
    const auto values = connection.multiGet(keys);
    TORCH_CHECK(values.size() == keys.size(), "the store answered ", values.size(), " counts for ",
                keys.size(), " keys");
    std::vector<int64_t> counts(size, -1);
    for (size_t i = 0; i < values.size(); ++i) {
      counts[senders[i]] = parse_sent_count(values[i], senders[i]);
    }
    return counts;
  }

  // What a poll settled; finished outside `mutex`, since finishing runs the waiters' callbacks
  // (which may post the next recv).
  struct Settled {
    std::vector<std::pair<Completion, Completion>> matched;  // (recv's, the message's)
    std::vector<std::pair<Completion, std::string>> failed;

    void finish() {
      for (auto& [done, message] : matched) {
        message->addCallback([done = done](c10::ivalue::Future& arrived) {
          if (arrived.hasError()) {
            done->setError(arrived.exception_ptr());
          } else {
            done->markCompleted(c10::IValue());
          }
        });
      }
      for (auto& [done, why] : failed) {
        done->setError(std::make_exception_ptr(std::runtime_error("c10d_func: " + why)));
      }
    }
  };

  // Under `mutex`: takes what the counts allow, in posting order per tag, and fails what is
  // past its deadline.
  Settled settle(const std::map<int64_t, std::vector<int64_t>>& counts,
                 const std::map<int64_t, std::string>& errors) {
    Settled settled;
    std::set<int64_t> blocked_tags;  // a tag's later recvs wait behind its first unmatched one
    const auto now = std::chrono::steady_clock::now();
    for (auto it = waiting.begin(); it != waiting.end();) {
      WaitingRecv& recv = *it;
      const size_t before = settled.matched.size() + settled.failed.size();
      if (recv.named >= 0) {
        // Posted once nothing of its tag waits ahead of it; its channel bounds it from there.
        int64_t source = recv.named;
        if (!blocked_tags.count(recv.tag) && match) {
          if (auto message = match(recv.tag, {}, recv.tensor, source)) {
            settled.matched.emplace_back(recv.done, *message);
          }
        }
      } else if (auto error = errors.find(recv.tag); error != errors.end()) {
        settled.failed.emplace_back(
            recv.done, what(recv.tag) + " failed reading the senders' counts: " + error->second);
      } else if (auto found = counts.find(recv.tag);
                 found != counts.end() && !blocked_tags.count(recv.tag) && match) {
        int64_t source = -1;
        if (auto message = match(recv.tag, found->second, recv.tensor, source)) {
          recv.source->store(static_cast<int>(source));
          settled.matched.emplace_back(recv.done, *message);
        }
      }
      if (settled.matched.size() + settled.failed.size() == before && recv.named < 0 &&
          now >= recv.deadline) {
        settled.failed.emplace_back(
            recv.done, what(recv.tag) + ": no member's message arrived within " +
                           std::to_string(recv.timeout.count()) +
                           " ms (a sender counts its messages to this member in the group's "
                           "store once it has seen this member receive from any source; no "
                           "member's count was ahead of the messages received from it, and a "
                           "member started with C10D_FUNC_ANNOUNCE_SENDS=0 counts none)");
      }
      if (settled.matched.size() + settled.failed.size() > before) {
        it = waiting.erase(it);
      } else {
        blocked_tags.insert(recv.tag);
        ++it;
      }
    }
    return settled;
  }

  void run() {
    // Polls back to back while recvs keep matching, then backs off to this.
    constexpr auto kLongestNap = std::chrono::microseconds(2000);
    std::chrono::microseconds nap(0);
    while (true) {
      std::vector<int64_t> tags;
      {
        std::unique_lock<std::mutex> lock(mutex);
        if (waiting.empty()) {
          wake.wait(lock, [this] { return stopping || !waiting.empty(); });
        } else if (nap.count() > 0) {
          wake.wait_for(lock, nap, [this] { return stopping || posted_since_poll; });
        }
        if (stopping) {
          Settled gone;
          for (auto& recv : waiting) {
            gone.failed.emplace_back(
                recv.done, what(recv.tag) + ": the group was destroyed before a message arrived");
          }
          waiting.clear();
          lock.unlock();
          gone.finish();
          return;
        }
        posted_since_poll = false;
        for (const auto& recv : waiting) {
          if (std::find(tags.begin(), tags.end(), recv.tag) == tags.end()) {
            tags.push_back(recv.tag);
          }
        }
      }
      std::map<int64_t, std::vector<int64_t>> counts;
      std::map<int64_t, std::string> errors;
      for (int64_t tag : tags) {
        try {
          counts[tag] = sent_counts(*connection, tag);
        } catch (const std::exception& error) {
          errors[tag] = error.what();
        }
      }
      Settled settled;
      {
        std::lock_guard<std::mutex> lock(mutex);
        settled = settle(counts, errors);
      }
      const bool progressed = !settled.matched.empty() || !settled.failed.empty();
      settled.finish();
      nap = progressed ? std::chrono::microseconds(0)
                       : std::min(kLongestNap, std::max(nap * 2, std::chrono::microseconds(20)));
    }
  }
};

AnySourceWaiter::AnySourceWaiter(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t size,
                                 std::string group, Match match)
    : state_(std::make_shared<State>()) {
  state_->connection = private_connection(store);
  state_->rank = rank;
  state_->size = size;
  state_->group = std::move(group);
  state_->match = std::move(match);
}

AnySourceWaiter::~AnySourceWaiter() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->match = nullptr;  // the owner's channels go with it
  state_->wake.notify_all();
}

Completion AnySourceWaiter::wait_for(const at::Tensor& tensor, int64_t tag,
                                     std::shared_ptr<std::atomic<int>> source,
                                     std::chrono::milliseconds timeout) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->waiting.push_back(
      {tensor, tag, std::move(source), done, std::chrono::steady_clock::now() + timeout, timeout});
  state_->posted_since_poll = true;
  if (!state_->running) {
    state_->running = true;
    // Detached: a store request in flight may take up to the store's timeout to return.
    std::thread([state = state_] { state->run(); }).detach();
  }
  state_->wake.notify_one();
  return done;
}

std::optional<Completion> AnySourceWaiter::wait_behind_any_source(const at::Tensor& tensor,
                                                                  int64_t tag, int64_t sender) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const bool any_ahead =
      std::any_of(state_->waiting.begin(), state_->waiting.end(),
                  [tag](const WaitingRecv& recv) { return recv.tag == tag && recv.named < 0; });
  if (!any_ahead) {
    return std::nullopt;
  }
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  state_->waiting.push_back({tensor, tag, nullptr, done,
                             std::chrono::steady_clock::time_point::max(),
                             std::chrono::milliseconds(0), sender});
  return done;
}

}  // namespace c10d_func
