// See roll_call.h.
#include "transports/roll_call.h"

#include "transports/rank_format.h"

#include <algorithm>
#include <condition_variable>
#include <iomanip>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace c10d_func {
namespace {

// What the helper thread hands back; shared, since the caller may leave before the helper does.
// `latest` is the roll as of the helper's last complete round of checks: a caller whose wait ends
// while a round is still under way (a loaded host answers slowly) reports that, not an
// unreachable store.
struct Answers {
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  std::optional<RollCall> latest;
  RollCall result;
};

std::string answer_key(const std::string& occasion, int64_t member) {
  return "roll_call/" + occasion + "/" + std::to_string(member);
}

void collect(const c10::intrusive_ptr<c10d::Store>& store, const std::string& occasion,
             int64_t rank, const std::vector<int64_t>& members,
             std::chrono::steady_clock::time_point deadline, Answers& answers) {
  RollCall result;
  try {
    store->set(answer_key(occasion, rank), std::vector<uint8_t>{1});
    std::vector<bool> answered(members.size(), false);
    answered[rank] = true;
    while (true) {
      RollCall round{.store_answered = true};
      for (size_t m = 0; m < members.size(); ++m) {
        if (!answered[m]) {
          answered[m] = store->check({answer_key(occasion, static_cast<int64_t>(m))});
        }
        if (!answered[m]) {
          round.absent.push_back(members[m]);
        }
      }
      const bool over = round.absent.empty() || std::chrono::steady_clock::now() >= deadline;
      {
        std::lock_guard<std::mutex> lock(answers.mutex);
        answers.latest = round;
      }
      if (over) {
        result = std::move(round);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    result.store_answered = false;
  }
  std::lock_guard<std::mutex> lock(answers.mutex);
  answers.result = std::move(result);
  answers.finished = true;
  answers.done.notify_all();
}

}  // namespace

RollCall call_the_roll(const Rendezvous& rendezvous, const std::string& occasion,
                       std::chrono::milliseconds bound) {
  auto answers = std::make_shared<Answers>();
  const auto deadline = std::chrono::steady_clock::now() + bound;
  // Detached: a store cut off blocks its caller up to the store's own timeout, which the
  // failing collective must not wait for. The thread owns what it uses.
  std::thread([store = rendezvous.store, occasion, rank = rendezvous.rank,
               members = rendezvous.members, deadline, answers] {
    collect(store, occasion, rank, members, deadline, *answers);
  }).detach();
  std::unique_lock<std::mutex> lock(answers->mutex);
  // A little past the bound: the helper's last round of checks.
  answers->done.wait_until(lock, deadline + std::chrono::milliseconds(200),
                           [&] { return answers->finished; });
  if (answers->finished) {
    return answers->result;
  }
  // Still checking: the store answered every round so far, only slowly.
  return answers->latest.value_or(RollCall{});
}

void answer_roll_call(const Rendezvous& rendezvous, const std::string& occasion) {
  std::thread([store = rendezvous.store, key = answer_key(occasion, rendezvous.rank)] {
    try {
      store->set(key, std::vector<uint8_t>{1});
    } catch (const std::exception&) {
      // The caller's roll call reports the store as unreachable.
    }
  }).detach();
}

std::chrono::milliseconds roll_call_bound(std::chrono::milliseconds timeout) {
  // Survivors learn of a failure within milliseconds of each other (a connection reset, the same
  // timeout, a peer's failure published in shared memory): a second is ample.
  return std::clamp(timeout / 8, std::chrono::milliseconds(250), std::chrono::milliseconds(1000));
}

std::string findings_of(const RollCall& roll_call, std::chrono::milliseconds bound,
                        const std::vector<int64_t>& elsewhere) {
  std::ostringstream text;
  const double seconds = static_cast<double>(bound.count()) / 1000.0;
  if (!roll_call.store_answered) {
    text << "the store could not be reached for a roll call within " << seconds << " s";
    if (!elsewhere.empty()) {
      text << ": ranks " << format_ranks(elsewhere) << " on other hosts are unreachable from here";
    }
  } else if (roll_call.absent.empty()) {
    text << "every member answered a roll call (none is missing: the collective failed "
            "between live members)";
  } else {
    text << (roll_call.absent.size() == 1 ? "rank " : "ranks ")
         << (roll_call.absent.size() == 1 ? std::to_string(roll_call.absent.front())
                                          : format_ranks(roll_call.absent))
         << " did not answer a roll call within " << seconds << " s (exited, hung, or unreachable)";
  }
  return text.str();
}

FailureRollCall::FailureRollCall(Rendezvous rendezvous, std::vector<int64_t> elsewhere)
    : rendezvous_(std::move(rendezvous)), elsewhere_(std::move(elsewhere)) {}

std::string FailureRollCall::explain(const std::string& why) {
  if (called_.exchange(true)) {
    return why;
  }
  const auto bound = roll_call_bound(rendezvous_.timeout);
  return why + "; " + findings_of(call_the_roll(rendezvous_, "failure", bound), bound, elsewhere_);
}

}  // namespace c10d_func
