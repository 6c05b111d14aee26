// TaskQueue's quiet rests (transports/task_queue.h): what is left of a collective whose part for
// the peers went out in its call waits for its waiter or the progress thread's next wake-up,
// while any other rest or push wakes the thread; either way collectives run in issue order.
#include "transports/task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

TEST(TaskQueueTest, AQuietRestWaitsForItsWaiterWhichRunsItInItsOwnThread) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  const Completion done = begin(
      *queue,
      [&] {
        ran_on = std::this_thread::get_id();
        ran = true;
      },
      /*quiet=*/true);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran) << "the progress thread was woken for a quiet rest";
  wait_completion(done);
  EXPECT_TRUE(ran);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(TaskQueueTest, AnyLaterPushRunsAQuietRestFirst) {
  auto queue = TaskQueue::create();
  with_sleeping_thread(*queue);
  std::mutex order_mutex;
  std::vector<int> order;
  const auto record = [&](int what) {
    return [&, what] {
      std::lock_guard<std::mutex> lock(order_mutex);
      order.push_back(what);
    };
  };
  const Completion first = begin(*queue, record(1), /*quiet=*/true);
  const Completion second = queue->push(queue->lock(), record(2));
  // Nobody waits the first: the push woke the progress thread, which runs both, in order.
  ASSERT_TRUE(within([&] { return second->completed(); }, 5000ms));
  EXPECT_TRUE(first->completed());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
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

}  // namespace
}  // namespace c10d_func
