// Deferred waits (transports/completion.h) through when_all: waiting the whole runs every part's
// wait, not only the last part's (a Completion holds one deferred wait; a coalesced call of a
// group whose Works complete only when waited would otherwise never finish its first parts).
#include "transports/completion.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace c10d_func {
namespace {

using namespace std::chrono_literals;

TEST(DeferredWaits, WaitingWhenAllRunsEveryPartsWait) {
  std::atomic<int> first{0}, second{0};
  const Completion a = completed_when_waited([&] { ++first; });
  const Completion b = completed_when_waited([&] { ++second; });
  const Completion all = when_all({a, b});
  auto waited = std::async(std::launch::async, [all] { wait_completion(all); });
  const bool done = waited.wait_for(5s) == std::future_status::ready;
  if (!done) {
    run_deferred_wait(a);  // let the stuck waiter end before failing
    run_deferred_wait(b);
  }
  waited.wait();
  EXPECT_TRUE(done) << "waiting when_all left a part's deferred wait unrun";
  EXPECT_EQ(first.load(), 1);
  EXPECT_EQ(second.load(), 1);
  EXPECT_TRUE(a->completed() && b->completed() && all->completed());
}

TEST(DeferredWaits, APartWaitedFirstIsNotRunAgainThroughTheWhole) {
  std::atomic<int> runs{0};
  const Completion a = completed_when_waited([&] { ++runs; });
  const Completion b = completed_when_waited([] {});
  const Completion all = when_all({a, b});
  wait_completion(a);
  wait_completion(all);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(all->completed() && !all->hasError());
}

}  // namespace
}  // namespace c10d_func
