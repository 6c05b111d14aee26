#pragma once
// The leaders' link: one TCP connection between the first members ("leaders") of every two
// hosts of a hierarchical communicator, for small all_reduces between hosts. A small message
// between hosts costs its round trips and thread hand-offs, not its bytes: here each leader
// sends its buffer to every other leader and reduces what it receives, from the thread already
// running the collective, in one round, where Gloo's ring takes several rounds and hands each
// collective to a thread of its own.
//
// Every leader reduces the hosts' buffers in host order, so all hosts hold the same bits. Each
// message starts with the collective's number and size: leaders in different collectives fail,
// naming the peer. A peer that closes its end (its process died) or sends nothing within the
// timeout fails the collective, naming it.
#include <ATen/core/Tensor.h>

#include "transports/reduce_op.h"
#include "transports/rendezvous.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

class LeaderLink {
 public:
  // Connects the leaders of `rendezvous` (its members are the hosts' leaders, in host order).
  // Every leader calls it. Returns nullptr on every leader when one of them has no address its
  // peers can reach (they then use Gloo alone).
  static std::unique_ptr<LeaderLink> connect(const Rendezvous& rendezvous);
  ~LeaderLink();

  LeaderLink(const LeaderLink&) = delete;
  LeaderLink& operator=(const LeaderLink&) = delete;

  // In place: `buffer` (contiguous, CPU, a dtype reduce_into takes) becomes the reduction of
  // every leader's buffer. Blocks; raises naming the peer on a failure.
  void all_reduce(const at::Tensor& buffer, ReduceOp op);

 private:
  LeaderLink(const Rendezvous& rendezvous, std::vector<int> sockets);

  int64_t position_;              // this leader's index among the leaders
  std::vector<int64_t> members_;  // the leaders' global ranks, for messages
  std::vector<int> sockets_;      // per leader; -1 for this one
  std::chrono::milliseconds timeout_;
  uint64_t collectives_ = 0;
};

}  // namespace c10d_func
