// See shm_members.h.
#include "transports/shm/shm_members.h"

#include "transports/call_scope.h"

#include "transports/shm/shm_checks.h"
#include "transports/shm/shm_segment.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace c10d_func::shm {

using Clock = std::chrono::steady_clock;

Members::Members(Communicator& owner, char* base, const Rendezvous& rendezvous,
                 std::vector<pid_t> pids)
    : owner_(owner),
      base_(base),
      rank_(rendezvous.rank),
      size_(rendezvous.size),
      members_(rendezvous.members),
      pids_(std::move(pids)),
      group_(rendezvous.group),
      timeout_(rendezvous.timeout) {
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(pids_.size()) == size_);
  // Every member wrote its pid namespace before it said it had mapped the segment, which the
  // communicator is made after (a wrong one only makes a live member look dead, or a dead one
  // wait for the timeout).
  for (int64_t m = 0; m < size_; ++m) {
    pid_namespaces_.push_back(control(m).pid_ns);
  }
}

std::string Members::name_of(int64_t member) const {
  return "rank " + std::to_string(members_[member]);
}

void Members::begin(OpCode op, uint64_t detail) {
  // A composite transport's step also carries what its collective's members must agree on (the
  // root of a reduce run as an all_reduce): members that differ there announce different ones.
  current_ = fingerprint(op, detail ^ (StepDetail::current() * 0xc2b2ae3d27d4eb4fULL));
  ++collectives_;
  control(rank_).collective[collectives_ & 1].store(current_, std::memory_order_relaxed);
  first_barrier_ = true;
}

void Members::check_within_timeout(const char* op, Clock::time_point began) {
  const std::chrono::milliseconds timeout = timeout_.get();
  if (Clock::now() - began > timeout) {
    fail(op, "the collective ran past the timeout (" + std::to_string(timeout.count() / 1000.0) +
                 " s: the group's, or C10D_FUNC_TIMEOUT) in steps its members agreed on: a "
                 "member published a count no call of its asked for (a corrupted or "
                 "version-skewed peer)");
  }
}

void Members::publish(uint64_t step) {
  MemberControl& me = control(rank_);
  me.arrived.store(step, std::memory_order_release);
  me.wake.fetch_add(1, std::memory_order_seq_cst);
  if (me.sleepers.load(std::memory_order_seq_cst) > 0) {
    futex_wake_all(me.wake);
  }
}

void Members::advance() {
  publish(++steps_);
}

void Members::follow(int64_t leader, const char* op) {
  const uint64_t step = ++steps_;
  publish(step);
  if (leader != rank_) {
    wait_for(leader, step, op);
  }
}

void Members::barrier(const char* op) {
  const uint64_t step = ++steps_;
  publish(step);
  for (int64_t m = 0; m < size_; ++m) {
    if (m != rank_) {
      wait_for(m, step, op);
    }
  }
  if (first_barrier_) {
    first_barrier_ = false;
    check_same_collective(op);
  }
}

void Members::check_same_collective(const char* op) {
  for (int64_t m = 0; m < size_; ++m) {
    const uint64_t theirs = control(m).collective[collectives_ & 1].load(std::memory_order_relaxed);
    if (theirs != current_) {
      fail(op, "the members are in different collectives: " + name_of(m) + " is in " +
                   op_name(theirs & 0xff) + ", " + name_of(rank_) + " in " +
                   op_name(current_ & 0xff) +
                   " (or the same collective with another dtype, size, root or reduction)");
    }
  }
}

void Members::wait_for(int64_t member, uint64_t step, const char* op) {
  MemberControl& peer = control(member);
  const auto reached = [&] { return peer.arrived.load(std::memory_order_acquire) >= step; };
  for (int i = 0; i < kSpins; ++i) {
    if (reached()) {
      return;
    }
    cpu_relax();
  }
  for (int i = 0; i < kYields; ++i) {
    if (reached()) {
      return;
    }
    std::this_thread::yield();
  }
  const std::chrono::milliseconds timeout = timeout_.get();
  const auto deadline = Clock::now() + timeout;
  while (true) {
    peer.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = peer.wake.load(std::memory_order_seq_cst);
    if (!reached()) {
      futex_wait(peer.wake, seen, kSleepSlice);
    }
    peer.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached()) {
      return;
    }
    if (peer.failed.load(std::memory_order_acquire) != 0) {
      fail(op, name_of(member) + " failed: " + bounded_text(peer.failure, sizeof(peer.failure)));
    }
    // This member's communicator failed while it waited (a classic call's own Options.timeout
    // ran out while the caller's thread ran the collective, or another thread's collective
    // failed): stop at once rather than at the group's timeout.
    if (owner_.failed()) {
      const std::optional<std::string> failure = owner_.failure();
      TORCH_CHECK(false, "c10d_func.", op, " failed on group (", group_,
                  ", shm): this member's communicator failed while it waited for ", name_of(member),
                  ": ", failure.value_or("(no reason kept)"));
    }
    if (member_is_dead(pids_[member], pid_namespaces_[member])) {
      fail(op, name_of(member) + " (pid " + std::to_string(pids_[member]) +
                   ") exited during the collective");
    }
    if (Clock::now() > deadline) {
      fail(op, name_of(member) + " did not reach the collective within the timeout (" +
                   std::to_string(timeout.count() / 1000.0) +
                   " s: the group's, or C10D_FUNC_TIMEOUT); it may have skipped it, called "
                   "collectives in another order, or hung");
    }
  }
}

void Members::publish_failure(const std::string& why) {
  MemberControl& me = control(rank_);
  if (me.failed.load(std::memory_order_acquire) != 0) {
    return;
  }
  const size_t length = std::min(why.size(), sizeof(me.failure) - 1);
  std::memcpy(me.failure, why.data(), length);
  me.failure[length] = '\0';
  me.failed.store(1, std::memory_order_release);
  // Wake the peers asleep on this member's word: they find `failed` set.
  me.wake.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(me.wake);
}

void Members::fail(const char* op, const std::string& why) {
  const std::string reason =
      std::string("c10d_func.") + op + " failed on group (" + group_ + ", shm): " + why;
  owner_.mark_failed(reason);
  TORCH_CHECK(false, reason);
}

}  // namespace c10d_func::shm
