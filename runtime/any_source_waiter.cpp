// Receiving from any source, the receiving side: AnySourceWaiter, which polls the senders'
// counts (the store's, and those formed shared-memory channels show) and posts each waiting
// recv on the channel of a sender ahead of it; see any_source.h.
#include "runtime/any_source.h"

#include <ATen/core/ivalue.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include "runtime/store_connections.h"

#include <algorithm>
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
  Shown shown;  // likewise
  std::deque<WaitingRecv> waiting;
  bool running = false;
  bool stopping = false;
  bool posted_since_poll = false;

  // Per tag, the counts the last poll read (a poll runs outside `mutex`, and stores them under it).
  std::map<int64_t, std::vector<int64_t>> last_read;

  // Touched by the polling thread only.
  std::set<int64_t> tags_with_keys;

  using Clock = std::chrono::steady_clock;
  // For how long after a recv is posted or matched turns follow each other a yield apart (the
  // polling thread's, and a waiter's own: help_waiter).
  static constexpr auto kQuickTurnsFor = std::chrono::microseconds(200);

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

  // With `mutex` held: the counts to settle `tags` with: the store's as last read, each raised to
  // what the formed channels show. `shown_any`: some channel showed a count.
  std::map<int64_t, std::vector<int64_t>> with_shown(
      const std::map<int64_t, std::vector<int64_t>>& read, bool& shown_any) {
    std::map<int64_t, std::vector<int64_t>> counts = read;
    if (!shown) {
      return counts;
    }
    for (auto& [tag, of_tag] : counts) {
      const std::vector<int64_t> by_channels = shown(tag);
      for (size_t sender = 0; sender < of_tag.size() && sender < by_channels.size(); ++sender) {
        if (by_channels[sender] >= 0 && static_cast<int64_t>(sender) != rank) {
          shown_any = true;
          of_tag[sender] = std::max(of_tag[sender], by_channels[sender]);
        }
      }
    }
    return counts;
  }

  // The help of a recv from any source (help_when_waited), run by the thread that waits it
  // before it blocks: for up to kQuickTurnsFor, a yield apart, while a formed channel shows a
  // count for its tag, it settles that tag's recvs here (settle: in posting order) against the
  // counts last read raised to the shown ones. A message between processes of one host is then
  // taken, and its transfer run, by the thread that waits for it: no hand-off to the polling
  // thread and back. Counts only the store can tell are left to the polling thread, which goes on
  // meanwhile (either takes the recv, under `mutex`, in posting order).
  void help_waiter(const c10::ivalue::Future* key) {
    const auto until = Clock::now() + kQuickTurnsFor;
    while (true) {
      Settled settled;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stopping || !match) {
          return;
        }
        auto it = std::find_if(waiting.begin(), waiting.end(),
                               [key](const WaitingRecv& recv) { return recv.done.get() == key; });
        if (it == waiting.end()) {
          return;  // taken or failed already
        }
        if (auto read = last_read.find(it->tag); read != last_read.end()) {
          bool shown_any = false;
          const auto counts = with_shown({{it->tag, read->second}}, shown_any);
          if (!shown_any) {
            return;  // only the store can tell: the polling thread's
          }
          try {
            // As a turn of the polling thread, on this tag's counts: recvs in posting order.
            settled = settle(counts, {});
          } catch (const std::exception&) {
            return;  // the polling thread meets it again
          }
        }
      }
      settled.finish();
      for (const auto& [done, message] : settled.matched) {
        if (done.get() == key) {
          run_deferred_wait(message);  // the transfer, where the transport left it to its waiter
          return;
        }
      }
      if (Clock::now() >= until) {
        return;
      }
      std::this_thread::yield();
    }
  }

  void run() {
    // A poll reads the counts in the store (a request to its server); polls come back to back
    // while recvs keep matching, then back off to kLongestNap apart. Between polls, turns retry
    // the waiting recvs against the counts last read raised to what the formed shared-memory
    // channels show (a few loads): for kQuickTurnsFor after a recv is posted or matched, turns
    // follow each other with only a yield between them, where a channel shows a count, so that a
    // message between processes of one host is taken within microseconds of being sent.
    constexpr auto kLongestNap = std::chrono::microseconds(2000);
    std::chrono::microseconds nap(0);  // from one poll to the next
    Clock::time_point next_poll{};
    Clock::time_point quick_until{};
    bool shown_any = false;  // on the last turn
    while (true) {
      std::vector<int64_t> tags;
      std::map<int64_t, std::string> errors;
      Settled settled;
      bool polled = false;
      {
        std::unique_lock<std::mutex> lock(mutex);
        if (waiting.empty()) {
          wake.wait(lock, [this] { return stopping || !waiting.empty(); });
        } else if (shown_any && Clock::now() < quick_until && !posted_since_poll) {
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
        } else if (Clock::now() < next_poll) {
          wake.wait_until(lock, next_poll, [this] { return stopping || posted_since_poll; });
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
        const auto now = Clock::now();
        if (posted_since_poll) {
          posted_since_poll = false;
          next_poll = now;
          quick_until = now + kQuickTurnsFor;
        }
        for (const auto& recv : waiting) {
          if (std::find(tags.begin(), tags.end(), recv.tag) == tags.end()) {
            tags.push_back(recv.tag);
          }
        }
        polled = now >= next_poll || std::any_of(tags.begin(), tags.end(), [&](int64_t tag) {
                   return !last_read.count(tag);
                 });
      }
      std::map<int64_t, std::vector<int64_t>> fresh;
      if (polled) {
        for (int64_t tag : tags) {
          try {
            fresh[tag] = sent_counts(*connection, tag);
          } catch (const std::exception& error) {
            errors[tag] = error.what();
          }
        }
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto& [tag, counts] : fresh) {
          last_read[tag] = std::move(counts);
        }
        std::map<int64_t, std::vector<int64_t>> of_tags;
        for (int64_t tag : tags) {
          if (auto found = last_read.find(tag); found != last_read.end() && !errors.count(tag)) {
            of_tags.emplace(tag, found->second);
          }
        }
        shown_any = false;
        settled = settle(with_shown(of_tags, shown_any), errors);
      }
      const bool progressed = !settled.matched.empty() || !settled.failed.empty();
      settled.finish();
      const auto now = Clock::now();
      if (progressed) {
        nap = std::chrono::microseconds(0);
        next_poll = now;
        quick_until = now + kQuickTurnsFor;
      } else if (polled) {
        nap = std::min(kLongestNap, std::max(nap * 2, std::chrono::microseconds(20)));
        next_poll = now + nap;
      }
    }
  }
};

AnySourceWaiter::AnySourceWaiter(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t size,
                                 std::string group, Match match, Shown shown)
    : state_(std::make_shared<State>()) {
  state_->connection = private_connection(store);
  state_->rank = rank;
  state_->size = size;
  state_->group = std::move(group);
  state_->match = std::move(match);
  state_->shown = std::move(shown);
}

AnySourceWaiter::~AnySourceWaiter() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->match = nullptr;  // the owner's channels go with it
  state_->shown = nullptr;
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
  help_when_waited(done, [state = std::weak_ptr<State>(state_), key = done.get()] {
    if (auto alive = state.lock()) {
      // The transfer must not meet the waiter's Python dispatch modes, which would see the
      // transport's own tensor operations (as TaskQueue's help; the polling thread has none).
      c10::impl::ExcludeDispatchKeyGuard no_python(
          c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
      alive->help_waiter(key);
    }
  });
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
