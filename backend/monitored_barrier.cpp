// See monitored_barrier.h.
#include "backend/monitored_barrier.h"

#include "transports/rank_format.h"

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <thread>

namespace c10d_func {
namespace {

using Clock = std::chrono::steady_clock;

std::string arrived_key(int64_t rank) {
  return "arrived/" + std::to_string(rank);
}
constexpr const char* kReleased = "released";

// Whether `key` was set within `timeout`. Polled: a TCPStore wait that times out logs a warning
// of torch's own, which a barrier that names the missing member should not add to.
bool appeared(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key,
              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto nap = std::chrono::milliseconds(1);
  while (!store->check({key})) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
  return true;
}

std::string global_names(const std::vector<int64_t>& group_ranks,
                         const std::vector<int64_t>& members) {
  std::vector<int64_t> global;
  for (int64_t r : group_ranks) {
    global.push_back(members[r]);
  }
  return format_ranks(global);
}

}  // namespace

void monitored_barrier(const c10::intrusive_ptr<c10d::Store>& store, int64_t rank,
                       const std::vector<int64_t>& members, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds release_timeout, bool wait_all_ranks) {
  const int64_t size = static_cast<int64_t>(members.size());
  if (rank != 0) {
    store->set(arrived_key(rank), std::vector<uint8_t>{1});
    std::string outcome;
    if (appeared(store, kReleased, release_timeout)) {
      const auto value = store->get(kReleased);
      outcome.assign(value.begin(), value.end());
      if (outcome.empty()) {
        return;  // released
      }
    } else {
      outcome = "rank 0 did not release it within " + std::to_string(release_timeout.count()) +
                " ms (it is missing or stuck)";
    }
    TORCH_CHECK(false, "Rank ", rank,
                " successfully reached monitoredBarrier, but received errors while waiting for "
                "send/recv from rank 0. Please check rank 0 logs for faulty rank. (c10d_func: ",
                outcome, ")");
  }
  const auto start = Clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  };
  std::vector<int64_t> missing;
  std::vector<int64_t> passed;
  std::string failure;
  for (int64_t r = 1; r < size && failure.empty(); ++r) {
    // As on Gloo: with wait_all_ranks each member gets the whole timeout, else what is left.
    const auto allowed = wait_all_ranks ? timeout : timeout - elapsed();
    if (appeared(store, arrived_key(r), allowed)) {
      passed.push_back(r);
      continue;
    }
    missing.push_back(r);
    if (!wait_all_ranks && allowed.count() <= 0) {
      // Rank 0 spent the timeout on the members before r (or it was 0): Gloo's words for that.
      std::ostringstream why;
      why << "Rank 0 timed out in monitoredBarrier after " << timeout.count() << " ms.\n";
      if (passed.empty()) {
        why << "No ranks successfully processed in monitoredBarrier.";
      } else {
        why << "Successfully processed ranks: " << c10::Join(", ", passed);
      }
      why << " (c10d_func: global rank " << members[r] << " had not arrived)";
      failure = why.str();
    } else if (!wait_all_ranks) {
      std::ostringstream why;
      why << "[Rank 0]: Rank " << r << " failed to pass monitoredBarrier in " << timeout.count()
          << " ms (c10d_func: global rank " << members[r] << " did not arrive)";
      failure = why.str();
    }
  }
  if (failure.empty() && !missing.empty()) {
    std::ostringstream why;
    why << "[Rank 0]: Ranks " << c10::Join(", ", missing) << " failed to pass monitoredBarrier in "
        << timeout.count() << " ms (c10d_func: global ranks " << global_names(missing, members)
        << " did not arrive)";
    failure = why.str();
  }
  // The members that arrived learn the outcome now, not at their own timeout.
  store->set(kReleased, std::vector<uint8_t>(failure.begin(), failure.end()));
  TORCH_CHECK(failure.empty(), failure);
}

}  // namespace c10d_func
