#pragma once
// A rail's link: one TCP connection between every two members of a rail (one member per host,
// of equal local index; rail 0 is the hosts' first members, their "leaders"), for the
// hierarchy's all_reduces, all_gathers, broadcasts, scatters and gathers between hosts (and,
// between two hosts, its reduce_scatters). Each member sends its buffer to every other member of
// the rail and reduces (or, for all_gather, keeps) what it receives, in one round: a small message
// costs its round trips and thread hand-offs, not its bytes, and Gloo's ring takes several rounds
// and hands each collective to a thread of its own. Between two hosts one round is also what the
// bytes need (each side sends its buffer once, as a ring would), so large messages use it too: sent
// from the caller's buffer in windows of at most 8 MiB, received into buffers kept across
// collectives (a window each), and reduced in place as the bytes arrive. An all_gather's blocks
// are received straight into the caller's rows, at any size.
//
// Every member reduces the hosts' buffers in host order, so all hosts hold the same bits (two
// hosts: the one binary reduction is commutative, so in place is the same bits). Each message
// starts with the collective's number, the size it carries and the size it expects back, and
// StepDetail (call_scope.h: the root of a
// reduce run as an all_reduce): members in different collectives fail, naming
// the peer. A peer that closes its end (its process died) or sends nothing within the timeout
// fails the collective, naming it.
#include <ATen/core/Tensor.h>

#include "transports/reduce_op.h"
#include "transports/rendezvous.h"
#include "transports/shared_timeout.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

// What starts every message on a link (named apart from shm::Header: the unity build may put
// both in one translation unit).
struct RailHeader {
  uint64_t collective;
  uint64_t bytes;     // the payload the sender sends the receiver
  uint64_t detail;    // StepDetail::current(): e.g. the root of a reduce run as an all_reduce
  uint64_t receives;  // the payload the sender expects from the receiver (an all_to_all's differ)
  // An all_to_all's payload made of several members' parts (PartLayouts): how the bytes sent
  // split into them, and how the bytes expected do; 0 elsewhere.
  uint64_t layout = 0;
  uint64_t expected_layout = 0;
};

// The details (StepDetail) of an all_to_all's two kinds of exchange between hosts
// (two_step_all_to_all.cpp): its step along the rail, and the comparison of the hosts' sizes
// before flat Gloo. Two hosts whose members' split sizes do not pair up can take one each: both
// sides then fail with a c10::ValueError saying so (check_header), not at their timeout.
constexpr uint64_t kAllToAllStepDetail = 0x6a09e667f3bcc908ULL;
constexpr uint64_t kAllToAllSizesDetail = 0xbb67ae8584caa73bULL;

// Per position of a rail: a digest of the sizes of the parts an all_to_all's payload to it is
// made of (`sends`, in the order they follow one another) and of those expected from it
// (`receives`). Equal totals can hide parts of other sizes: a host's members sending another
// host's member one row more and one row fewer than it expects from each, which, unchecked,
// would land in the wrong places of its output.
struct PartLayouts {
  std::vector<uint64_t> sends, receives;
  // The digest of parts of these sizes, in this order.
  static uint64_t of(const std::vector<int64_t>& sizes);
};

// A small all_reduce's first half, done in the caller's thread (RailLink::begin_all_reduce).
struct BegunExchange {
  uint64_t collective = 0;    // its number on the link
  uint64_t detail = 0;        // StepDetail::current() where it was begun
  std::vector<char> payload;  // this member's buffer as it was then
  std::vector<size_t> sent;   // per position: the bytes of header and payload gone to it
  // Every peer has this member's whole part: none needs this member's thread to finish.
  bool all_sent() const;
};

// Which way an exchange's payload goes (RailLink::exchange): every way, or one way between a
// root and every other member.
struct RootedFlow {
  int64_t root = -1;     // -1: every member sends to and receives from every other
  bool to_root = false;  // from every other member to the root (gather), else from the root
};

class RailLink {
 public:
  // Connects the members of `rendezvous` (one per host, in host order); `name` says which rail,
  // for messages ("rail 0's link"). Every member calls it. Returns nullptr on every member when
  // one of them has no address its peers can reach (they then use Gloo alone).
  static std::unique_ptr<RailLink> connect(const Rendezvous& rendezvous, const std::string& name);
  ~RailLink();

  RailLink(const RailLink&) = delete;
  RailLink& operator=(const RailLink&) = delete;

  // The number of hosts the rail joins.
  int64_t size() const { return static_cast<int64_t>(sockets_.size()); }

  // Whether all_reduce is the way to all-reduce `bytes` between the hosts: between two at every
  // size (one exchange is what a ring would send), between more up to 1 MiB (each member sends
  // its whole buffer to every other: above that, Gloo's ring sends fewer bytes).
  bool serves_all_reduce(int64_t bytes) const {
    return size() == 2 || bytes <= kAllReduceBytesBetweenMore;
  }
  static constexpr int64_t kAllReduceBytesBetweenMore = int64_t{1} << 20;

  // In place: `buffer` (contiguous, CPU, a dtype reduce_into takes) becomes the reduction of
  // every member's buffer. Blocks; raises naming the peer on a failure.
  void all_reduce(const at::Tensor& buffer, ReduceOp op);

  // A small all_reduce in two halves, so that the caller's thread sends this member's part in
  // the call and no peer waits for this process's progress thread (LinkedHostsCommunicator):
  // begin_all_reduce numbers it and sends the header and a copy of `buffer` (at most
  // kBegunBytes) to every peer, as far as the sockets take them without waiting;
  // finish_all_reduce, on whichever thread runs the collective next, sends the rest, receives
  // the peers' parts and reduces them into `buffer` (unchanged since) as all_reduce does. Nothing
  // else may use the link between the two.
  std::shared_ptr<BegunExchange> begin_all_reduce(const at::Tensor& buffer);
  void finish_all_reduce(BegunExchange& begun, const at::Tensor& buffer, ReduceOp op);
  // At most this many bytes are begun in a call: with one begun collective unread per peer at a
  // time (the next one is queued behind it, which wakes the progress thread), the peers' sockets
  // always have room for what is sent, so a begun call never waits for a peer to read.
  static constexpr int64_t kBegunBytes = int64_t{32} << 10;

  // Two hosts: sends `send` to the peer and folds what the peer sends (as many bytes) into
  // `into`, in place: with `send` the peer's part and `into` this member's own, a reduce_scatter
  // between two hosts in one exchange (each side sends only what the other keeps); with both the
  // same tensor, all_reduce. Contiguous tensors of one dtype and size.
  void reduce_with_peer(const at::Tensor& send, const at::Tensor& into, ReduceOp op);

  // Every member's `block` (contiguous, CPU, one size on every member) into row p of `blocks`
  // (contiguous, [size(), block.numel()]) for each position p, this member's own row included.
  // Each member sends its block to every other once and receives the others' straight into their
  // rows: what a ring all_gather sends and receives, in one round.
  void all_gather(const at::Tensor& block, const at::Tensor& blocks);

  // The member at position `root` sends `buffer` (contiguous, one size on every member) to every
  // other, which receive it straight into theirs.
  void broadcast(const at::Tensor& buffer, int64_t root);
  // A broadcast with a detail to compare (StepDetail::current(): a scatter run as one) shows
  // every member's header to every other as well, the payload still going from the root alone:
  // members naming other roots fail on the spot, even two that each think they send. The
  // hierarchy's rails off the root's call this instead (`bytes`: the root rail's payload),
  // exchanging headers only, so that a disagreement between hosts fails on every rail.
  void compare_rooted(size_t bytes);

  // The member at position `root` sends `sends[p]` (contiguous, one size) to the member at
  // position p, for every other position (its own entry is not read), which receives it straight
  // into `receive` (contiguous, as many bytes; the root's is not touched): a scatter's step between
  // hosts, in one round. Headers go everywhere as in a broadcast with a detail.
  void scatter(const std::vector<at::Tensor>& sends, const at::Tensor& receive, int64_t root);

  // Every member but the one at position `root` sends `send` (contiguous, one size) to it, which
  // receives member p's straight into `receives[p]` (contiguous, as many bytes; its own entry is
  // not touched): a gather's step between hosts, in one round. Headers go everywhere.
  void gather(const at::Tensor& send, const std::vector<at::Tensor>& receives, int64_t root);

  // Each member sends `sends[p]` to the member at position p and receives that member's part
  // for it into `receives[p]`, for every other position p (contiguous tensors of any sizes; the
  // own position's entries are not touched): an all_to_all's step between hosts, in one round.
  // What a member sends must be what its receiver expects: the headers carry both sizes, and a
  // pair that disagrees fails on both sides, naming the sizes (a c10::ValueError), once the
  // exchange with the other peers is done (none of them is left waiting for a payload).
  // `layouts` (payloads made of several members' parts): compared the same way.
  void all_to_all(const std::vector<at::Tensor>& sends, const std::vector<at::Tensor>& receives,
                  const PartLayouts& layouts = {});

  // After a failure of this member's part of a collective before its step between hosts: sends
  // every peer a header no step matches, as far as its socket takes it now, so that the peers
  // waiting in that step fail at once, naming this member, instead of at their timeout.
  void refuse();

  // Bounds the exchanges that start from now on (any thread may call it).
  void set_timeout(std::chrono::milliseconds timeout) { timeout_.set(timeout); }

 private:
  RailLink(const Rendezvous& rendezvous, std::string name, std::vector<int> sockets);
  // The root's parts of a scatter or gather (`op`): one per position, contiguous and of one size
  // (its own entry not read). Sets `addresses[p]` to part p's data (nullptr for the root's own)
  // and returns that size.
  size_t root_parts(const char* op, const std::vector<at::Tensor>& parts, int64_t root,
                    std::vector<char*>& addresses) const;
  // Two hosts: sends `window` (at most kWindowBytes) and folds the peer's window into `into`
  // (`window` itself for all_reduce) as its bytes arrive.
  // `begun`: the window's exchange was begun (its payload is `begun`'s copy).
  void fold_from_peer(const at::Tensor& window, const at::Tensor& into, ReduceOp op,
                      BegunExchange* begun = nullptr);
  // More than two hosts: `buffer` becomes the reduction of every member's, in host order, once
  // the exchange has brought them.
  void reduce_in_host_order(const at::Tensor& buffer, ReduceOp op);
  // Sends and receives until every peer has every byte, calling `received_up_to(bytes)` as the
  // payload both sent to and received from every peer grows. `payload` is this member's (`bytes`
  // of it, one size on every member). Peer p's payload lands in `receive_into[p]` when given,
  // else in its inbox. `rooted` (RootedFlow): a payload one way, between one position and every
  // other (with a detail, every member also sends its header to every other; a position no member
  // has: headers alone). `send_from[p]`, when given, is what peer p gets instead of `payload`.
  // `begun`: an all_reduce's exchange begun in the call (its number, and what has gone to each
  // peer), finished from there.
  // `part_sizes` (all_to_all): the bytes sent to and received from each position, in place of
  // `bytes` (`send_from` and `receive_into` given).
  struct PartSizes {
    std::vector<size_t> sends, receives;
    PartLayouts layouts;  // empty: none
  };
  void exchange(char* payload, size_t bytes, const std::function<void(size_t)>& received_up_to,
                const std::vector<char*>& receive_into = {}, RootedFlow rooted = {},
                const std::vector<char*>& send_from = {}, BegunExchange* begun = nullptr,
                const PartSizes* part_sizes = nullptr);
  // Fails on a header from position `p` (`theirs`) that does not match what this member sent it
  // (`headers[p]`), after showing its own to the peers it has not reached (`sent`, `sending`).
  // `parts`: an all_to_all's, whose sizes differ per peer and must pair up.
  void check_header(const RailHeader& theirs, const std::vector<RailHeader>& headers, int64_t p,
                    std::vector<size_t>& sent, const std::vector<size_t>& sending,
                    bool parts) const;

  int64_t position_;              // this member's index in the rail (its host's)
  std::vector<int64_t> members_;  // the rail's global ranks, for messages
  std::string name_;              // "rail 0's link", for messages
  std::vector<int> sockets_;      // per member; -1 for this one
  SharedTimeout timeout_;
  uint64_t collectives_ = 0;
  // Per member: its payload, kept across collectives (at most a window: rail_link.cpp).
  std::vector<std::vector<char>> inbox_;
};

}  // namespace c10d_func
