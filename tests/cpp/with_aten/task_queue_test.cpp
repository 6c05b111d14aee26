// TaskQueue's quiet rests (transports/task_queue.h): what is left of a collective whose part for
// the peers went out in its call waits for its waiter or the progress thread's next wake-up,
// while any other rest or push wakes the thread; either way collectives run in issue order.
// And collectives left to their waiters (push_for_waiter): run by the waiter in its own thread,
// else by the progress thread once their grace has passed, at once when handed out as a Future,
// or to reach a collective pushed behind them.
#include "transports/task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace c10d_func {
namespace {

using namespace std::chrono_literals;

// Starts the queue's progress thread (the first rest or push does) and lets it fall asleep.
void with_sleeping_thread(TaskQueue& queue) {
  wait_completion(queue.push(queue.lock(), [] {}));
  std::this_thread::sleep_for(20ms);
}

// Begins a collective in this thread (as a call does) whose rest runs `rest`.
Completion begin(TaskQueue& queue, std::function<void()> rest, bool quiet) {
  std::unique_lock<std::mutex> lock = queue.lock();
  EXPECT_TRUE(queue.idle());
  return queue.run_here_then_push(std::move(lock), [&] {
    return TaskQueue::Rest{std::move(rest), quiet};
  });
}

bool within(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// What ran, in the order it ran, on whichever thread.
class RunOrder {
 public:
  std::function<void()> record(int what) {
    return [this, what] {
      std::lock_guard<std::mutex> lock(mutex_);
      ran_.push_back(what);
    };
  }
  std::vector<int> ran() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ran_;
  }

 private:
  std::mutex mutex_;
  std::vector<int> ran_;
};

// Issues a collective with `issue` (given what it runs), checks that no thread runs it while
// nobody waits, then that waiting it runs it in this thread.
void expect_run_by_its_waiter(const std::function<Completion(std::function<void()>)>& issue) {
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  const Completion done = issue([&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran) << "the progress thread ran it before its waiter came";
  wait_completion(done);
  EXPECT_TRUE(ran);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(TaskQueueTest, AQuietRestWaitsForItsWaiterWhichRunsItInItsOwnThread) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  expect_run_by_its_waiter(
      [&](std::function<void()> rest) { return begin(*queue, std::move(rest), /*quiet=*/true); });
}

TEST(TaskQueueTest, AnyLaterPushRunsAQuietRestFirst) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  RunOrder order;
  const Completion first = begin(*queue, order.record(1), /*quiet=*/true);
  const Completion second = queue->push(queue->lock(), order.record(2));
  // Nobody waits the first: the push woke the progress thread, which runs both, in order.
  ASSERT_TRUE(within([&] { return second->completed(); }, 5000ms));
  EXPECT_TRUE(first->completed());
  EXPECT_EQ(order.ran(), (std::vector<int>{1, 2}));
}

TEST(TaskQueueTest, ARestThatIsNotQuietRunsWithNobodyWaiting) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  const Completion done = begin(
      *queue, [&] { ran = true; }, /*quiet=*/false);
  EXPECT_TRUE(within([&] { return ran.load(); }, 5000ms));
  wait_completion(done);
}

TEST(TaskQueueTest, AQuietRestHandedOutAsAFutureIsRunByTheProgressThread) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  const Completion done = begin(
      *queue, [&] { ran = true; }, /*quiet=*/true);
  // A Work's getFuture: torch may wait the Future itself, past wait_completion.
  expose_completion(done);
  EXPECT_TRUE(within([&] { return done->completed(); }, 5000ms));
  EXPECT_TRUE(ran);
}

TEST(TaskQueueTest, StoppingRunsAQuietRest) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  const Completion done = begin(
      *queue, [&] { ran = true; }, /*quiet=*/true);
  queue->stop();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(done->completed());
}

// A grace no test waits out: whatever runs such a collective before it is what a test checks.
constexpr std::chrono::microseconds kLongGrace = std::chrono::seconds(60);

TEST(TaskQueueTest, ACollectiveLeftToItsWaiterRunsInTheWaitersThreadWithNoThreadWoken) {
  auto queue = TaskQueue::create(kLongGrace);
  with_sleeping_thread(*queue);
  expect_run_by_its_waiter([&](std::function<void()> work) {
    return queue->push_for_waiter(queue->lock(), std::move(work));
  });
}

TEST(TaskQueueTest, ACollectiveNobodyWaitsRunsOnTheProgressThreadOnceItsGraceHasPassed) {
  auto queue = TaskQueue::create(std::chrono::milliseconds(5));
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  const Completion first = queue->push_for_waiter(queue->lock(), [&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  EXPECT_TRUE(within([&] { return first->completed(); }, 5000ms));
  EXPECT_TRUE(ran);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  // Again once the thread has gone back to sleep with no deadline (nothing left to it lately).
  std::this_thread::sleep_for(50ms);
  ran = false;
  const Completion second = queue->push_for_waiter(queue->lock(), [&] { ran = true; });
  EXPECT_TRUE(within([&] { return second->completed(); }, 5000ms));
  EXPECT_TRUE(ran);
}

TEST(TaskQueueTest, ManyCollectivesNobodyWaitsRunInIssueOrder) {
  auto queue = TaskQueue::create(std::chrono::milliseconds(2));
  RunOrder order;
  std::vector<Completion> issued;
  for (int i = 0; i < 50; ++i) {
    issued.push_back(queue->push_for_waiter(queue->lock(), order.record(i)));
    if (i % 7 == 0) {
      std::this_thread::sleep_for(1ms);  // some issued while the thread sleeps to a deadline
    }
  }
  EXPECT_TRUE(within([&] { return issued.back()->completed(); }, 5000ms));
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) {
    expected[i] = i;
  }
  EXPECT_EQ(order.ran(), expected);
}

TEST(TaskQueueTest, ACollectiveLeftToItsWaiterHandedOutAsAFutureRunsAtOnce) {
  auto queue = TaskQueue::create(kLongGrace);
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  const Completion done = queue->push_for_waiter(queue->lock(), [&] { ran = true; });
  expose_completion(done);
  EXPECT_TRUE(within([&] { return done->completed(); }, 5000ms));
  EXPECT_TRUE(ran);
}

TEST(TaskQueueTest, APushBehindCollectivesLeftToTheirWaitersRunsThemAllInOrder) {
  auto queue = TaskQueue::create(kLongGrace);
  with_sleeping_thread(*queue);
  RunOrder order;
  const Completion first = queue->push_for_waiter(queue->lock(), order.record(1));
  const Completion second = queue->push_for_waiter(queue->lock(), order.record(2));
  const Completion third = queue->push(queue->lock(), order.record(3));
  ASSERT_TRUE(within([&] { return third->completed(); }, 5000ms));
  EXPECT_TRUE(first->completed());
  EXPECT_TRUE(second->completed());
  EXPECT_EQ(order.ran(), (std::vector<int>{1, 2, 3}));
}

TEST(TaskQueueTest, AWaiterOfALaterCollectiveRunsTheOnesLeftToWaitersBeforeItInItsThread) {
  // Waited in reverse order: the second's waiter would block on the first, whose own waiter
  // comes later, so it runs both, in order, without waiting out the first's grace.
  auto queue = TaskQueue::create(kLongGrace);
  with_sleeping_thread(*queue);
  RunOrder order;
  std::atomic<int> elsewhere{0};
  const auto here = std::this_thread::get_id();
  const auto recorded_here = [&](int what) {
    return [&, record = order.record(what)] {
      elsewhere += std::this_thread::get_id() != here ? 1 : 0;
      record();
    };
  };
  const Completion first = queue->push_for_waiter(queue->lock(), recorded_here(1));
  const Completion second = queue->push_for_waiter(queue->lock(), recorded_here(2));
  wait_completion(second);
  EXPECT_TRUE(first->completed());
  EXPECT_EQ(order.ran(), (std::vector<int>{1, 2}));
  EXPECT_EQ(elsewhere.load(), 0) << "the progress thread ran one of them";
  wait_completion(first);
}

TEST(TaskQueueTest, StoppingRunsCollectivesLeftToTheirWaiters) {
  auto queue = TaskQueue::create(kLongGrace);
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  const Completion done = queue->push_for_waiter(queue->lock(), [&] { ran = true; });
  queue->stop();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(done->completed());
}

}  // namespace
}  // namespace c10d_func
