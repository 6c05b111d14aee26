// Receiving from any source, the sending side: the key names and SentCounts, which publishes
// this member's counts of its sends; see any_source.h (the receiving side:
// any_source_waiter.cpp).
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

void SentCounts::sent(int64_t receiver, int64_t tag, const Completion& done,
                      bool shown_by_channel) {
  bool waiting = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    State::Messages& of = state_->messages[{receiver, tag}];
    of.posted += 1;
    if (shown_by_channel) {
      // Its receiver reads the count from the channel: never published, and the thread is not
      // woken for it (a count published later still covers it: a count is of messages posted).
      of.received += 1;
      return;
    }
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

}  // namespace c10d_func
