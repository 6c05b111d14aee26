#pragma once
// Roll call: which members are still there after a collective failed. A member whose collective
// failed answers under `occasion` in the group's store and waits up to `bound` for the others'
// answers; the members that do not answer in time exited, hang, or cannot be reached (a link
// down). A transport's own error ("timed out waiting for recv", "connection closed") rarely
// names a rank; this names them all.
//
// The store is reached from a helper thread, so a store that does not answer (its host is the
// one cut off) cannot keep the caller past `bound`: the roll call then says so.
#include "transports/rendezvous.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace c10d_func {

struct RollCall {
  bool store_answered = false;  // false: the store could not be reached within the bound
  std::vector<int64_t> absent;  // global ranks that did not answer (only if store_answered)
};

// Answers for `rendezvous.rank` and collects the other members' answers, for at most `bound`.
RollCall call_the_roll(const Rendezvous& rendezvous, const std::string& occasion,
                       std::chrono::milliseconds bound);

// Answers a roll call under `occasion` for `rendezvous.rank` without waiting for the others: a
// member whose collective failed some other way (a peer's failure) tells the member calling
// the roll that it is there. In a thread of its own: the store may not answer.
void answer_roll_call(const Rendezvous& rendezvous, const std::string& occasion);

// How long a roll call waits: long enough for survivors that fail a little later (a member
// that learns of the failure from a peer), short next to the timeout that ended the collective.
std::chrono::milliseconds roll_call_bound(std::chrono::milliseconds timeout);

// "ranks [2, 3] did not answer a roll call within 2 s (exited, hung, or unreachable)", or what
// the roll call found otherwise; `elsewhere` (the members on other hosts) are named when the
// store could not be reached.
std::string findings_of(const RollCall& roll_call, std::chrono::milliseconds bound,
                        const std::vector<int64_t>& elsewhere);

// A communicator's roll call at its first failure: explain() appends who is missing to the
// first failure's reason and returns later reasons unchanged (the members are out of step by
// then, and a second roll call would find nobody). Held by shared_ptr, so completion callbacks
// may use it after their communicator is gone.
class FailureRollCall {
 public:
  // `elsewhere`: the members on other hosts, named when the store cannot be reached.
  FailureRollCall(Rendezvous rendezvous, std::vector<int64_t> elsewhere);
  std::string explain(const std::string& why);

 private:
  Rendezvous rendezvous_;
  std::vector<int64_t> elsewhere_;
  std::atomic<bool> called_{false};
};

}  // namespace c10d_func
