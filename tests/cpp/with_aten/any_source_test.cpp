// Receiving from any source (runtime/any_source.h) on a real TCPStore server in this process:
// what a sender counts reaches the waiter, which hands every member's count to its Match and
// completes with the member Match took; counts a formed channel shows are taken without the
// store (by the thread that waits the recv, where it can), and not published by their sender; a
// count that is not one fails the recv naming its sender (the store is writable by any member); a
// recv naming its sender waits behind earlier recvs from any source of its tag; no count ahead
// fails at the timeout; a waiter destroyed with recvs waiting fails them.
#include "runtime/any_source.h"

#include "tcp_store_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace c10d_func {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

// The count `sender` published to `receiver` on `tag` (0 while none is), once it is `expected`
// or 10 s have passed.
int64_t published_count_reaches(c10d::Store& store, int64_t sender, int64_t receiver, int64_t tag,
                                int64_t expected) {
  const std::string key = sent_count_key(sender, receiver, tag);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  int64_t published = 0;
  while (published != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
    published = store.check({key}) ? parse_sent_count(store.get(key), sender) : 0;
  }
  return published;
}

std::string error_of(const Completion& done) {
  done->wait();
  return done->hasError() ? done->tryRetrieveErrorMessage() : "(no error)";
}

TEST(AnySource, CountsAreParsedAndBounded) {
  EXPECT_EQ(parse_sent_count(bytes("0"), 1), 0);
  EXPECT_EQ(parse_sent_count(bytes("42"), 1), 42);
  EXPECT_EQ(parse_sent_count(bytes(std::to_string(std::numeric_limits<int64_t>::max())), 1),
            std::numeric_limits<int64_t>::max());
  for (const std::string bad :
       {"", "-1", "1x", " 1", "9223372036854775808", "12345678901234567890", "\x01\x02"}) {
    try {
      parse_sent_count(bytes(bad), 3);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const c10::Error& error) {
      const std::string what = error.what_without_backtrace();
      EXPECT_NE(what.find("sent by rank 3 is not a count"), std::string::npos) << what;
    }
  }
}

// A Match that takes the first member whose count is ahead of what it took from it, as
// PointToPoint's does, with a Completion of its own done at once.
struct RecordingMatch {
  std::mutex mutex;
  std::vector<int64_t> taken;  // per member
  std::vector<std::vector<int64_t>> seen;
  std::vector<std::string> posted;  // "any <member>" or "named <member>", in the order posted

  explicit RecordingMatch(int64_t size) : taken(size, 0) {}

  AnySourceWaiter::Match function() {
    return [this](int64_t, const std::vector<int64_t>& counts, const at::Tensor&,
                  int64_t& source) -> std::optional<Completion> {
      std::lock_guard<std::mutex> lock(mutex);
      if (source >= 0) {  // a recv naming its sender: posted on its channel whatever the counts
        posted.push_back("named " + std::to_string(source));
        taken[source] += 1;
        return received_now();
      }
      seen.push_back(counts);
      for (size_t member = 0; member < counts.size(); ++member) {
        if (counts[member] > taken[member]) {
          taken[member] += 1;
          source = static_cast<int64_t>(member);
          posted.push_back("any " + std::to_string(member));
          return received_now();
        }
      }
      return std::nullopt;
    };
  }

  static Completion received_now() {
    auto done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
    done->markCompleted(c10::IValue());
    return done;
  }
};

Completion waiting_send() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
}

Completion received_send() {
  auto done = waiting_send();
  done->markCompleted(c10::IValue());
  return done;
}

TEST(AnySource, CountedSendsAreTakenInTurnFromTheirSenders) {
  auto store = tcp_store_server();
  RecordingMatch match(3);
  AnySourceWaiter waiter(store, /*rank=*/0, /*size=*/3, "test group", match.function());
  SentCounts from_two(store, /*rank=*/2);
  std::vector<Completion> sends;  // waiting for their receiver: published once unclaimed
  for (auto [receiver, tag] : {std::pair{0, 5}, {0, 5}, {1, 5}, {0, 6}}) {  // to 0 on tag 5: two
    sends.push_back(waiting_send());
    from_two.sent(receiver, tag, sends.back());
  }
  for (int i = 0; i < 2; ++i) {
    auto source = std::make_shared<std::atomic<int>>(-1);
    auto done = waiter.wait_for(at::Tensor(), /*tag=*/5, source, 10s);
    done->wait();
    EXPECT_FALSE(done->hasError()) << done->tryRetrieveErrorMessage();
    EXPECT_EQ(source->load(), 2);
  }
  // The receiver said it takes tag 5 from any source (senders then publish to it at once); it
  // said nothing of tag 6.
  EXPECT_TRUE(store->check({any_source_wanted_key(0, 5)}));
  EXPECT_FALSE(store->check({any_source_wanted_key(0, 6)}));
  std::lock_guard<std::mutex> lock(match.mutex);
  ASSERT_FALSE(match.seen.empty());
  // This member's own slot is -1; rank 1 never sent; rank 2 sent two on tag 5 to rank 0.
  EXPECT_EQ(match.seen.back(), (std::vector<int64_t>{-1, 0, 2}));
}

// Counts are published only for messages left waiting, and only once their receiver has said it
// takes messages of the tag from any source; from then on at once, each with the count of every
// message before it.
TEST(AnySource, OnlyMessagesLeftWaitingForAReceiverFromAnySourceArePublished) {
  auto store = tcp_store_server();
  SentCounts counts(store, /*rank=*/1);
  const std::string key = sent_count_key(1, 0, 4);
  auto published_reaches = [&](int64_t expected) {
    return published_count_reaches(*store, 1, 0, 4, expected);
  };
  for (int i = 0; i < 3; ++i) {
    counts.sent(0, 4, received_send());  // taken as they came: nothing to announce
  }
  counts.sent(0, 4, waiting_send());  // the fourth waits, but no receiver from any source needs it
  std::this_thread::sleep_for(20 * SentCounts::kUnclaimedAfter);
  EXPECT_FALSE(store->check({key}));
  // Rank 0 starts receiving from any source on tag 4: the count, of all four, follows.
  store->set(any_source_wanted_key(0, 4), bytes("1"));
  EXPECT_EQ(published_reaches(4), 4);
  counts.sent(0, 4, waiting_send());  // published without the thread looking again
  EXPECT_EQ(published_reaches(5), 5);
  // Another tag to the same receiver is not one it takes from any source.
  counts.sent(0, 7, waiting_send());
  std::this_thread::sleep_for(20 * SentCounts::kUnclaimedAfter);
  EXPECT_FALSE(store->check({sent_count_key(1, 0, 7)}));
}

// The counting thread stops looking once sends stop coming (a pipeline's stages send every few
// milliseconds): the next send wakes it, and a message of it left waiting for a receiver from any
// source is still published.
TEST(AnySource, ASendAfterAQuietSpellWakesTheCountingThread) {
  auto store = tcp_store_server();
  SentCounts counts(store, /*rank=*/1);
  counts.sent(0, 4, received_send());
  std::this_thread::sleep_for(40 * SentCounts::kUnclaimedAfter);  // long past its quiet turns
  store->set(any_source_wanted_key(0, 4), bytes("1"));
  counts.sent(0, 4, waiting_send());
  EXPECT_EQ(published_count_reaches(*store, 1, 0, 4, 2), 2);
}

// A channel formed on shared memory shows its sender's count (any_source.h): its messages are
// taken with no count in the store, the store's count raised to the shown one, and a sender
// publishes none for them; a count it publishes later covers them (a count is of messages posted).
TEST(AnySource, CountsAFormedChannelShowsAreTakenWithoutTheStore) {
  auto store = tcp_store_server();
  RecordingMatch match(3);
  std::atomic<int64_t> shown_by_one{0};
  AnySourceWaiter waiter(store, /*rank=*/0, /*size=*/3, "test group", match.function(),
                         [&](int64_t tag) {
                           // A lower count than the store's (rank 2's) is never taken for it.
                           return tag == 5 ? std::vector<int64_t>{7, shown_by_one.load(), 0}
                                           : std::vector<int64_t>{-1, -1, -1};
                         });
  SentCounts from_one(store, /*rank=*/1);
  auto source = std::make_shared<std::atomic<int>>(-1);
  auto done = waiter.wait_for(at::Tensor(), /*tag=*/5, source, 10s);
  std::this_thread::sleep_for(20ms);  // nothing shown or counted yet
  EXPECT_FALSE(done->completed());
  // Rank 1 posts two messages on its formed channel: shown, not published.
  from_one.sent(0, 5, waiting_send(), /*shown_by_channel=*/true);
  from_one.sent(0, 5, waiting_send(), /*shown_by_channel=*/true);
  shown_by_one = 2;
  done->wait();
  EXPECT_FALSE(done->hasError()) << done->tryRetrieveErrorMessage();
  EXPECT_EQ(source->load(), 1);
  auto second = waiter.wait_for(at::Tensor(), 5, source, 10s);
  second->wait();
  EXPECT_EQ(source->load(), 1);
  {
    std::lock_guard<std::mutex> lock(match.mutex);
    // This member's own slot stays -1 whatever is shown there; rank 1's store count (0) is
    // raised to the shown 2.
    ASSERT_FALSE(match.seen.empty());
    EXPECT_EQ(match.seen.back(), (std::vector<int64_t>{-1, 2, 0}));
    EXPECT_EQ(match.posted, (std::vector<std::string>{"any 1", "any 1"}));
  }
  std::this_thread::sleep_for(20 * SentCounts::kUnclaimedAfter);
  EXPECT_EQ(parse_sent_count(store->get(sent_count_key(1, 0, 5)), 1), 0);  // the waiter's "0"
  // A message whose channel shows nothing (one between hosts) is published, with those before.
  from_one.sent(0, 5, waiting_send());
  EXPECT_EQ(published_count_reaches(*store, 1, 0, 5, 3), 3);
}

// The thread that waits a recv from any source takes a message a formed channel shows itself
// (help_waiter), before it blocks: here only that thread is shown the message, which the polling
// thread therefore never takes.
TEST(AnySource, TheThreadThatWaitsTakesAShownMessageItself) {
  auto store = tcp_store_server();
  RecordingMatch match(2);
  const std::thread::id waiting_thread = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<std::thread::id> matched_on;
  AnySourceWaiter::Match recording = match.function();
  AnySourceWaiter waiter(
      store, /*rank=*/0, /*size=*/2, "test group",
      [&](int64_t tag, const std::vector<int64_t>& counts, const at::Tensor& tensor,
          int64_t& source) {
        auto message = recording(tag, counts, tensor, source);
        if (message) {
          std::lock_guard<std::mutex> lock(mutex);
          matched_on.push_back(std::this_thread::get_id());
        }
        return message;
      },
      [&](int64_t) {
        return std::vector<int64_t>{-1, std::this_thread::get_id() == waiting_thread ? 1 : 0};
      });
  auto source = std::make_shared<std::atomic<int>>(-1);
  auto done = waiter.wait_for(at::Tensor(), /*tag=*/5, source, 2s);
  std::this_thread::sleep_for(20ms);  // the polling thread has read the store's counts
  EXPECT_FALSE(done->completed());
  wait_completion(done);
  EXPECT_FALSE(done->hasError()) << done->tryRetrieveErrorMessage();
  EXPECT_EQ(source->load(), 1);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(matched_on, (std::vector<std::thread::id>{waiting_thread}));
}

TEST(AnySource, AValueThatIsNoCountFailsTheRecvNamingItsSender) {
  auto store = tcp_store_server();
  RecordingMatch match(3);
  AnySourceWaiter waiter(store, 0, 3, "test group", match.function());
  store->set(sent_count_key(/*sender=*/1, /*receiver=*/0, /*tag=*/7), bytes("garbage"));
  auto done = waiter.wait_for(at::Tensor(), 7, std::make_shared<std::atomic<int>>(-1), 10s);
  const std::string error = error_of(done);
  EXPECT_NE(error.find("recv from any source (tag 7) on test group"), std::string::npos) << error;
  EXPECT_NE(error.find("sent by rank 1 is not a count"), std::string::npos) << error;
}

// Gloo matches the recvs of a tag in the order posted: a recv naming rank 2, posted while a recv
// from any source of its tag waits, is posted on its channel only after that one took rank 2's
// first message; on another tag, or with nothing waiting, it goes to its channel at once.
TEST(AnySource, ARecvNamingItsSenderQueuesBehindEarlierRecvsFromAnySourceOfItsTag) {
  auto store = tcp_store_server();
  RecordingMatch match(3);
  AnySourceWaiter waiter(store, 0, 3, "test group", match.function());
  EXPECT_FALSE(waiter.wait_behind_any_source(at::Tensor(), /*tag=*/4, /*sender=*/2).has_value());
  auto source = std::make_shared<std::atomic<int>>(-1);
  auto from_any = waiter.wait_for(at::Tensor(), 4, source, 10s);
  auto named = waiter.wait_behind_any_source(at::Tensor(), 4, 2);
  ASSERT_TRUE(named.has_value());
  EXPECT_FALSE(waiter.wait_behind_any_source(at::Tensor(), /*tag=*/9, 2).has_value());
  std::this_thread::sleep_for(50ms);  // nothing sent yet: both wait, the named one included
  EXPECT_FALSE((*named)->completed());
  {
    std::lock_guard<std::mutex> lock(match.mutex);
    EXPECT_TRUE(match.posted.empty());
  }
  SentCounts from_two(store, /*rank=*/2);
  auto send = waiting_send();
  from_two.sent(0, 4, send);
  from_any->wait();
  (*named)->wait();
  EXPECT_FALSE(from_any->hasError()) << from_any->tryRetrieveErrorMessage();
  EXPECT_FALSE((*named)->hasError()) << (*named)->tryRetrieveErrorMessage();
  EXPECT_EQ(source->load(), 2);
  std::lock_guard<std::mutex> lock(match.mutex);
  EXPECT_EQ(match.posted, (std::vector<std::string>{"any 2", "named 2"}));
}

TEST(AnySource, NoCountAheadFailsAtTheTimeout) {
  auto store = tcp_store_server();
  RecordingMatch match(2);
  AnySourceWaiter waiter(store, 0, 2, "test group", match.function());
  const auto started = std::chrono::steady_clock::now();
  auto done = waiter.wait_for(at::Tensor(), 3, std::make_shared<std::atomic<int>>(-1), 200ms);
  const std::string error = error_of(done);
  EXPECT_NE(error.find("no member's message arrived within 200 ms"), std::string::npos) << error;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(AnySource, ADestroyedWaiterFailsItsWaitingRecvs) {
  auto store = tcp_store_server();
  RecordingMatch match(2);
  Completion done;
  {
    AnySourceWaiter waiter(store, 0, 2, "test group", match.function());
    done = waiter.wait_for(at::Tensor(), 3, std::make_shared<std::atomic<int>>(-1), 60s);
  }
  const std::string error = error_of(done);
  EXPECT_NE(error.find("the group was destroyed before a message arrived"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace c10d_func
