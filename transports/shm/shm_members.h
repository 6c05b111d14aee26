#pragma once
// Members: how the members of one shm communicator meet in its segment: the barrier they pass
// together, the announcement of the collective each is in (compared at the first barrier), and
// the failure of a collective when a member dies or does not arrive in time.
//
// Barrier: a member publishes the step it reached, then waits for every other member to reach
// it: spinning briefly, then yielding, then sleeping on the member's futex word (so hosts with
// more ranks than cores are not starved). A sleeping waiter wakes every 10 ms to check whether
// the member it waits for is still alive (its pid) and whether C10D_FUNC_TIMEOUT has passed; a
// dead or missing member fails the collective on the others, naming its rank, and the
// communicator refuses further use.
//
// Used only by the thread running the communicator's collectives (one at a time, in order).
#include "transports/communicator.h"
#include "transports/rendezvous.h"
#include "transports/shared_timeout.h"
#include "transports/shm/shm_layout.h"

#include <chrono>
#include <string>
#include <vector>

namespace c10d_func::shm {

class Members {
 public:
  // `pids`: each member's, as forming checked them (shm_formation.h).
  Members(Communicator& owner, char* base, const Rendezvous& rendezvous, std::vector<pid_t> pids);

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  MemberControl& control(int64_t member) const {
    return reinterpret_cast<MemberControl*>(base_ + controls_offset())[member];
  }
  // This collective's parity: announcements and exchanged values alternate between two places.
  int parity() const { return static_cast<int>(collectives_ & 1); }

  // Announces the collective this member is in; checked by the others at its first barrier.
  // Every collective has at least one barrier, so no member can be two collectives ahead of
  // another: announcements alternate between two places by the collective's parity.
  void begin(OpCode op, uint64_t detail);
  void barrier(const char* op);
  // Fails the collective once `began` is longer ago than the timeout: for a loop of steps whose
  // count the members agreed on (a peer's count is believed up to a bound: one too large would
  // otherwise keep every member stepping, each barrier met, with no wait to time out).
  void check_within_timeout(const char* op, std::chrono::steady_clock::time_point began);
  // A pipeline inside a collective, after its first barrier: the leader publishes each step it
  // completes without waiting (advance); the others take the same steps waiting for the leader
  // alone (follow). Every member takes as many steps, so the barrier after them is met by all.
  void advance();
  void follow(int64_t leader, const char* op);

  // Fails the collective on this member (and the communicator for later calls). Worded as
  // pending_work words a failure seen at a wait, since a small collective fails inside the call.
  [[noreturn]] void fail(const char* op, const std::string& why);
  // Tells the peers that this member's communicator failed (why): those waiting on it fail.
  void publish_failure(const std::string& why);
  // "rank 3": a member by its global rank, for messages.
  std::string name_of(int64_t member) const;
  // A member's pid as it recorded it at formation (later writes to its control block are not
  // believed: a pid is what cross-memory attach and the liveness check act on).
  pid_t pid_of(int64_t member) const { return pids_[member]; }
  const std::vector<pid_t>& pids() const { return pids_; }
  // Bounds the waits of the collectives that start from now on (any thread may call it).
  void set_timeout(std::chrono::milliseconds timeout) { timeout_.set(timeout); }

 private:
  void wait_for(int64_t member, uint64_t step, const char* op);
  // Publishes that this member reached `step` and wakes those asleep on it.
  void publish(uint64_t step);
  void check_same_collective(const char* op);

  Communicator& owner_;
  char* base_;
  int64_t rank_;
  int64_t size_;
  std::vector<int64_t> members_;  // global ranks, for messages
  std::vector<pid_t> pids_;       // per member, checked once at formation
  std::vector<uint64_t> pid_namespaces_;
  std::string group_;  // "tag='x', chunk [0, 1]", for messages
  SharedTimeout timeout_;

  uint64_t steps_ = 0;
  uint64_t collectives_ = 0;
  uint64_t current_ = 0;
  bool first_barrier_ = false;
};

}  // namespace c10d_func::shm
