// HierarchicalCommunicator: shared memory inside each host, Gloo between hosts; see
// hierarchical_communicator.h.
#include "transports/hierarchy/hierarchical_communicator.h"

#include <ATen/ATen.h>

#include "transports/call_scope.h"
#include "transports/hierarchy/host_placement.h"
#include "transports/hierarchy/host_spanning_communicator.h"
#include "transports/hierarchy/rail_link.h"
#include "transports/hierarchy/rooted_through_rail.h"
#include "transports/hierarchy/two_step_all_to_all.h"
#include "transports/reduction_staging.h"
#include "transports/roll_call.h"
#include "transports/task_queue.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace c10d_func {
namespace {

// all_reduce up to this size goes through the hosts' leaders (reduce_through_leaders) on even
// hosts too: fewer processes on the network. Above it every rail carries a piece (measured on 2
// hosts x 2 ranks over 10 Gb/s, in turns: 1 MiB 1.25-1.32 ms back to back through the rails
// against 1.37-1.70 through the leaders, 512 KiB level, 128-256 KiB 10-60% slower).
constexpr int64_t kLeadersOnlyBytes = int64_t{512} << 10;
// A large all_reduce between two hosts goes in segments of this many bytes per member's piece
// (at least two pieces' worth to pipeline at all): one segment's piece crosses the network while
// the host reduces the next and gathers the one before (reduce_scatter_reduce_gather). 512 KiB
// measured best on 2 hosts x 2 ranks over a 10 Gb/s link (8 MiB: 10.1 ms unsegmented, 9.2-9.6
// in 1 MiB pieces, 8.4-8.7 in 512 KiB, 9.8-10.2 in 256 KiB).
constexpr int64_t kPipelinedPieceBytes = int64_t{512} << 10;

// Below this many bytes of a whole all_gather output or reduce_scatter input, the host step is
// one collective over a reordered copy: copying costs less than a second step's synchronization.
constexpr int64_t kSplitHostStepBytes = int64_t{256} << 10;

// Up to this many bytes a functional collective is left to its waiter (TaskQueue::
// push_for_waiter) on a host with more of the chunk's threads than cores: there waking the
// progress thread costs more than the steps, and the woken thread takes them from the waiter
// (which then sleeps until they are done) more often than not. Measured on 2 hosts x 2 ranks
// (2 cores), back to back, in turns: 8 B through the ops 67-95 against 124-140 us, 64 KiB
// 168-205 against 216-228 us; through the eager API level (199-245 us).
constexpr int64_t kForWaiterBytes = int64_t{64} << 10;

// Whether a host with `members` of the chunk leaves small functional collectives to their
// waiters: C10D_FUNC_WAITER_FIRST=1 always, 0 never, unset where the members' threads (each a
// calling and a progress thread) outnumber the cores this process may run on.
bool leaves_small_to_waiters(int64_t members) {
  static const char* const choice = std::getenv("C10D_FUNC_WAITER_FIRST");
  if (choice != nullptr && *choice != '\0') {
    return std::strcmp(choice, "0") != 0;
  }
  cpu_set_t cores;
  CPU_ZERO(&cores);
  const int64_t usable = sched_getaffinity(0, sizeof(cores), &cores) == 0
                             ? CPU_COUNT(&cores)
                             : static_cast<int64_t>(std::thread::hardware_concurrency());
  return members * 2 > usable;
}

// Whether the host step of an all_gather or reduce_scatter of `bytes` runs as one collective
// per host, straight on the caller's buffer: members numbered host by host (as torchrun numbers
// them), and a message large enough that the copy costs more than the extra steps.
bool splits_host_step(const HostPlacement& placement, int64_t bytes) {
  return placement.host_major && bytes >= kSplitHostStepBytes;
}

class HierarchicalCommunicator final : public HostSpanningCommunicator {
 public:
  HierarchicalCommunicator(int64_t rank, std::vector<int64_t> members, HostPlacement placement,
                           std::shared_ptr<Communicator> local, std::shared_ptr<Communicator> rail,
                           std::shared_ptr<Communicator> flat, std::unique_ptr<RailLink> rail_link,
                           std::shared_ptr<FailureRollCall> roll_call)
      : HostSpanningCommunicator(std::move(flat), roll_call),
        rank_(rank),
        members_(std::move(members)),
        placement_(std::move(placement)),
        local_(std::move(local)),
        rail_(std::move(rail)),
        rail_link_(std::move(rail_link)),
        even_(placement_.even()),
        for_waiters_(leaves_small_to_waiters(local_->size())) {}

  ~HierarchicalCommunicator() override {
    steps_.stop();
    link_queue_->stop();
  }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return static_cast<int64_t>(placement_.host_of.size()); }
  std::string backend_name() const override { return "shm+gloo"; }
  void set_timeout(std::chrono::milliseconds timeout) override {
    local_->set_timeout(timeout);
    if (rail_) {  // none on an uneven host's later members
      rail_->set_timeout(timeout);
    }
    flat_->set_timeout(timeout);
    if (rail_link_) {
      rail_link_->set_timeout(timeout);
    }
  }

  // Outputs, snapshots and user tensors come from the host's symmetric memory, as on one host:
  // blocks touched once and reused (no page faults), read and written in place by the host's
  // steps.
  at::Tensor snapshot(const at::Tensor& input) override { return local_->snapshot(input); }
  at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    return local_->new_output(sizes, options);
  }
  at::Tensor new_symmetric(at::IntArrayRef sizes, const at::TensorOptions& options) override {
    return local_->new_symmetric(sizes, options);
  }
  std::vector<std::pair<std::string, int64_t>> memory_stats() const override {
    return local_->memory_stats();
  }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    return submit(buffer.nbytes(), [this, buffer, reduce_op] {
      at::AutoDispatchBelowADInplaceOrView below;
      auto staged = stage_reduction(buffer, reduce_op, /*transport_averages_floats=*/false);
      const at::Tensor wire = staged.wire.view(-1);
      if (even_ && wire.numel() * wire.element_size() > kLeadersOnlyBytes) {
        reduce_scatter_reduce_gather(wire, staged.wire_op);
      } else {
        reduce_through_leaders(wire, staged.wire_op);
      }
      staged.finish(buffer, size());
    });
  }

  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    if (!even_ || input.numel() == 0) {
      return on_flat([=, this] { return flat_->all_gather(output, input); });
    }
    return submit(output.nbytes(), [this, output, input] {
      at::AutoDispatchBelowADInplaceOrView below;
      const int64_t n = size();
      const int64_t hosts = static_cast<int64_t>(placement_.hosts.size());
      const int64_t per_host = local_->size();
      const int64_t block = input.numel();
      // Along the rail first, each member its own block, then inside the host: each host's
      // blocks cross the network once (gathering inside the host first would send every
      // host's blocks along every rail). The rail's result is row h = host h's block; the host
      // step reads it in place from symmetric memory.
      auto along_rail = local_->new_output({hosts, block}, input.options());
      const at::Tensor mine = input.contiguous().view(-1);
      auto out = output.view({n, block});
      if (splits_host_step(placement_, output.nbytes())) {
        // Host h's members' blocks are one contiguous run of the output: gathered inside the
        // host straight into it, with no reordering copy of the whole output. This host's own
        // blocks need nothing from the network: they are gathered while the rail's cross it.
        const int64_t here = placement_.host_of[rank_];
        const Completion crossing = gather_along_rail(mine, along_rail, /*overlapped=*/true);
        try {
          wait_for(local_->all_gather(out.narrow(0, here * per_host, per_host), mine));
        } catch (...) {
          wait_completion(crossing);  // done with the buffers before they go back
          throw;
        }
        wait_for(crossing);
        for (int64_t h = 0; h < hosts; ++h) {
          if (h != here) {
            wait_for(local_->all_gather(out.narrow(0, h * per_host, per_host), along_rail[h]));
          }
        }
        return;
      }
      wait_for(gather_along_rail(mine, along_rail, /*overlapped=*/false));
      // Any other numbering: gathered inside the host in (local index, host) order, then placed.
      auto in_host = local_->new_output({per_host, hosts, block}, input.options());
      wait_for(local_->all_gather(in_host.view(-1), along_rail.view(-1)));
      for (int64_t h = 0; h < hosts; ++h) {
        for (int64_t l = 0; l < per_host; ++l) {
          out[placement_.hosts[h][l]].copy_(in_host[l][h]);
        }
      }
    });
  }

  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override {
    if (!even_ || input.numel() == 0) {
      return on_flat([=, this] { return flat_->reduce_scatter(output, input, reduce_op); });
    }
    return submit(input.nbytes(), [this, output, input, reduce_op] {
      at::AutoDispatchBelowADInplaceOrView below;
      auto staged_out = stage_reduction(output, reduce_op, false);
      auto staged_in = stage_reduction(input, reduce_op, false);
      const int64_t n = size();
      const int64_t hosts = static_cast<int64_t>(placement_.hosts.size());
      const int64_t per_host = n / hosts;
      const at::Tensor blocks = staged_in.wire.reshape({n, -1});
      const int64_t block = blocks.size(1);
      // Local member l reduces, inside the host, the blocks of every host's member l; then the
      // rail reduces those across hosts, host h keeping its own (row h).
      auto along_rail = local_->new_output({hosts, block}, blocks.options());
      if (splits_host_step(placement_, blocks.nbytes())) {
        // Host h's members' blocks are one contiguous run of the input: reduce-scattered inside
        // the host straight from it, with no reordered copy of the whole input.
        for (int64_t h = 0; h < hosts; ++h) {
          wait_for(local_->reduce_scatter(along_rail[h],
                                          blocks.narrow(0, h * per_host, per_host).reshape(-1),
                                          staged_out.wire_op));
        }
      } else {
        // Rows by (local index, host), then one reduce_scatter inside the host.
        auto ordered = local_->new_output({per_host, hosts, block}, blocks.options());
        for (int64_t h = 0; h < hosts; ++h) {
          for (int64_t l = 0; l < per_host; ++l) {
            ordered[l][h].copy_(blocks[placement_.hosts[h][l]]);
          }
        }
        wait_for(local_->reduce_scatter(along_rail.view(-1), ordered.view(-1), staged_out.wire_op));
      }
      if (rail_link_ && rail_link_->size() == 2) {
        // Between two hosts, one exchange over the rail's link: each side sends the part the
        // other keeps and folds the other's into its own (Gloo's reduce_scatter took about
        // three times what the bytes need on a 10 Gb/s link).
        const int64_t host = placement_.host_of[rank_];
        rail_link_->reduce_with_peer(along_rail[1 - host], along_rail[host], staged_out.wire_op);
        staged_out.wire.view(-1).copy_(along_rail[host]);
      } else {
        wait_for(rail_->reduce_scatter(staged_out.wire.view(-1), along_rail.view(-1),
                                       staged_out.wire_op));
      }
      staged_out.finish(output, n);
    });
  }

  // With or without split sizes, on even hosts whose rails all have their links: small and medium
  // all_to_alls in two steps, larger ones on flat Gloo (two_step_all_to_all.h).
  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    if (!even_ || !rail_link_) {
      return HostSpanningCommunicator::all_to_all(output, input, std::move(output_split_sizes),
                                                  std::move(input_split_sizes));
    }
    const int64_t bytes = std::max(input.nbytes(), output.nbytes());
    return submit(bytes, [this, output, input, output_split_sizes, input_split_sizes] {
      at::AutoDispatchBelowADInplaceOrView below;
      // Its call on flat_, where it makes one, is issued from the queue: in order with every
      // other (on_flat).
      all_to_all_across_hosts(output, input, output_split_sizes, input_split_sizes, placement_,
                              rank_, members_, *local_, *rail_link_, *flat_);
    });
  }

  // reduce runs as the all_reduce: every member ends with the result, of which reduce promises
  // only the root's. Its steps send each host's partial result across once each way, which a
  // full-duplex link carries in the time one way takes, in fewer rounds than Gloo's reduce over
  // every member (README, "Across hosts": reduce). On uneven hosts above kLeadersOnlyBytes the
  // whole buffer would cross through the leaders alone: Gloo's there.
  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    if (even_ || buffer.nbytes() <= kLeadersOnlyBytes) {
      StepDetail agreed(StepDetail::of_root("reduce", root));  // members naming other roots fail
      return all_reduce(buffer, reduce_op);
    }
    return HostSpanningCommunicator::reduce(buffer, root, reduce_op);
  }

  // gather and scatter of small messages as the all_gather and the broadcast, on even hosts
  // (HostSpanningCommunicator).
  bool runs_rooted_as_collectives() const override { return even_; }

  // Above that, a scatter up to kScatterOverLinksBytes of input and a gather of any size, on
  // even hosts numbered host by host, send each other host's members' blocks in one message
  // along the root's rail (rooted_through_rail.h); a larger scatter, Gloo's
  // (HostSpanningCommunicator says why).
  bool links_carry_rooted_steps() const override {
    return even_ && placement_.host_major && rail_link_ != nullptr;
  }
  Completion scatter_over_links(const at::Tensor& output, const at::Tensor& input,
                                int64_t root) override {
    return through_rail(&scatter_through_rail, output, input, root, output);
  }
  Completion gather_over_links(const at::Tensor& output, const at::Tensor& input,
                               int64_t root) override {
    return through_rail(&gather_through_rail, output, input, root, input);
  }
  using RootedStep = void (*)(const at::Tensor&, const at::Tensor&, int64_t, const HostPlacement&,
                              int64_t, Communicator&, RailLink&);
  Completion through_rail(RootedStep step, const at::Tensor& output, const at::Tensor& input,
                          int64_t root, const at::Tensor& block) {
    return submit(size() * block.nbytes(), [this, step, output, input, root] {
      at::AutoDispatchBelowADInplaceOrView below;
      step(output, input, root, placement_, rank_, *local_, *rail_link_);
    });
  }

  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    if (!even_ || buffer.numel() == 0 || !buffer.is_contiguous()) {
      return on_flat([=, this] { return flat_->broadcast(buffer, root); });
    }
    return submit(buffer.nbytes(), [this, buffer, root] {
      at::AutoDispatchBelowADInplaceOrView below;
      // Along the root's rail first (the members of its local index: the buffer crosses to each
      // other host once, where the flat broadcast sends it to every member elsewhere), then
      // inside every host from that member.
      const int64_t root_local = placement_.local_index[root];
      if (local_->rank() == root_local) {
        const int64_t root_host = placement_.host_of[root];
        if (rail_link_) {
          rail_link_->broadcast(buffer, root_host);
        } else {
          wait_for(rail_->broadcast(buffer, root_host));
        }
      } else if (rail_link_ && StepDetail::current() != 0) {
        // A scatter run as this broadcast: the other rails compare the root too, so that hosts
        // naming roots of other local indices fail on every rail, none at its timeout.
        rail_link_->compare_rooted(buffer.nbytes());
      }
      wait_for(local_->broadcast(buffer, root_local));
    });
  }

 private:
  // Every host reduces into its first member (the leader), the leaders all-reduce between hosts,
  // and each leader broadcasts inside its host: one message between hosts per host instead of
  // one per member, in fewer steps. Serves uneven hosts, and small messages on even ones, where
  // the number of steps and of processes on the network costs more than the bytes.
  void reduce_through_leaders(const at::Tensor& wire, ReduceOp op) {
    wait_for(local_->all_reduce(wire, op));
    if (local_->rank() == 0) {  // rail 0 joins the hosts' leaders
      all_reduce_along_rail(wire, op);
    }
    wait_for(local_->broadcast(wire, 0));
  }

  // Even hosts: each local member reduces one piece inside the host, the rail all-reduces it
  // between hosts, and the host gathers the pieces back. `wire` is flat. A large message goes in
  // segments, pipelined: while one segment's piece crosses the network (on the link's thread),
  // the host reduce-scatters the next and gathers the one before, so the link is rarely idle.
  void reduce_scatter_reduce_gather(const at::Tensor& wire, ReduceOp op) {
    const int64_t per_host = local_->size();
    const int64_t pieces = (wire.numel() + per_host - 1) / per_host;  // per member, all segments
    const int64_t piece_bytes = pieces * wire.element_size();
    // Between two hosts only: between more, segments' pieces small enough for the rail's link
    // would each go to every other host instead of along Gloo's ring (more bytes in all).
    const bool two_hosts_linked = rail_link_ && rail_link_->size() == 2;
    const int64_t segments =
        two_hosts_linked ? std::max<int64_t>(1, piece_bytes / kPipelinedPieceBytes) : 1;
    const int64_t piece = (pieces + segments - 1) / segments;  // per member and segment
    struct Segment {
      at::Tensor part;    // of `wire`
      at::Tensor padded;  // `part`, or a copy padded to per_host pieces
      at::Tensor mine;    // this member's piece
    };
    std::vector<Segment> parts(segments);
    const auto reduce_in_host = [&](int64_t s) {
      Segment& segment = parts[s];
      const int64_t start = std::min(s * piece * per_host, wire.numel());
      segment.part = wire.narrow(0, start, std::min(piece * per_host, wire.numel() - start));
      segment.padded = segment.part;
      if (segment.part.numel() != piece * per_host) {
        segment.padded = local_->new_output({piece * per_host}, wire.options());
        segment.padded.narrow(0, 0, segment.part.numel()).copy_(segment.part);
        segment.padded.narrow(0, segment.part.numel(), piece * per_host - segment.part.numel())
            .zero_();
      }
      segment.mine = local_->new_output({piece}, wire.options());
      wait_for(local_->reduce_scatter(segment.mine, segment.padded, op));
    };
    const auto gather_in_host = [&](int64_t s) {
      Segment& segment = parts[s];
      wait_for(local_->all_gather(segment.padded, segment.mine));
      if (!segment.padded.is_same(segment.part)) {
        segment.part.copy_(segment.padded.narrow(0, 0, segment.part.numel()));
      }
      segment = Segment{};  // its pool buffers go back for the next segments
    };
    if (segments == 1) {
      reduce_in_host(0);
      all_reduce_along_rail(parts[0].mine, op);
      gather_in_host(0);
      return;
    }
    Completion crossing;  // the segment on the link's thread
    const auto cross = [&](int64_t s) {
      crossing = link_queue_->push(link_queue_->lock(),
                                   StepDetail::carried([this, mine = parts[s].mine, op] {
                                     all_reduce_along_rail(mine, op);
                                   }));
    };
    try {
      reduce_in_host(0);
      cross(0);
      for (int64_t s = 1; s < segments; ++s) {
        reduce_in_host(s);
        wait_for(crossing);
        cross(s);
        gather_in_host(s - 1);
      }
      wait_for(crossing);
      gather_in_host(segments - 1);
    } catch (...) {
      // The link's thread must be done with this collective's buffers before they go back.
      if (crossing) {
        wait_completion(crossing);
      }
      throw;
    }
  }

  // Every host's `block` into row h of `rows` ([hosts, block]), between hosts: over the rail's
  // own link at any number of hosts (each member sends its block to every other once, the bytes
  // a ring sends, in one round; Gloo's all_gather took about twice what the bytes need on a
  // 10 Gb/s link), else Gloo's. `overlapped`: the caller works while it crosses, so the link's
  // exchange runs on the link's thread; otherwise in this call (no hand-off for a small one).
  Completion gather_along_rail(const at::Tensor& block, const at::Tensor& rows, bool overlapped) {
    if (!rail_link_) {
      return rail_->all_gather(rows.view(-1), block);
    }
    if (!overlapped) {
      rail_link_->all_gather(block, rows);
      return completed();
    }
    return link_queue_->push(link_queue_->lock(), StepDetail::carried([this, block, rows] {
                               rail_link_->all_gather(block, rows);
                             }));
  }

  // Between hosts, over the rail's own link where it serves (RailLink::serves_all_reduce), else
  // Gloo, whose ring compares nothing: a reduce run as this all_reduce (StepDetail) compares its
  // root over the link first, so that members naming other roots fail there too.
  void all_reduce_along_rail(const at::Tensor& wire, ReduceOp op) {
    if (rail_link_ && rail_link_->serves_all_reduce(wire.nbytes())) {
      rail_link_->all_reduce(wire, op);
      return;
    }
    if (rail_link_ && StepDetail::current() != 0) {
      rail_link_->all_reduce(at::zeros({1}, wire.options().dtype(at::kInt)), ReduceOp::kSum);
    }
    wait_for(rail_->all_reduce(wire, op));
  }

  // Queues a collective's steps: left to its waiter when small and from a functional op (waited
  // through wait_tensor; classic calls' Futures are waited and chained directly, and bounded by
  // the group's timeout) on a host that leaves them so (leaves_small_to_waiters).
  Completion submit(int64_t bytes, std::function<void()> steps) {
    const bool for_waiter = for_waiters_ && bytes <= kForWaiterBytes && FunctionalOpCall::active();
    return steps_.submit(std::move(steps), for_waiter);
  }

  // Failing tells this host's members (waiting on this one in shared memory) at once.
  void on_failed(const std::string& reason) override { local_->mark_failed(reason); }

  int64_t rank_;
  std::vector<int64_t> members_;  // global ranks, for messages
  HostPlacement placement_;
  std::shared_ptr<Communicator> local_;  // this member's host
  std::shared_ptr<Communicator> rail_;   // equal local index across hosts (uneven: first members)
  std::unique_ptr<RailLink> rail_link_;  // this member's rail's; used by the worker thread
  bool even_;
  bool for_waiters_;  // small functional collectives left to their waiters (kForWaiterBytes)

  // The segments of a pipelined all_reduce, and a large all_gather's rail step, cross between
  // hosts on this queue's thread while the collective's own thread runs the host's steps.
  std::shared_ptr<TaskQueue> link_queue_ = TaskQueue::create();
};

}  // namespace

std::shared_ptr<Communicator> make_host_and_rail_communicator(
    int64_t rank, std::vector<int64_t> members, HostPlacement placement,
    std::shared_ptr<Communicator> local, std::shared_ptr<Communicator> rail,
    std::shared_ptr<Communicator> flat, std::unique_ptr<RailLink> rail_link,
    std::shared_ptr<FailureRollCall> roll_call) {
  return std::make_shared<HierarchicalCommunicator>(
      rank, std::move(members), std::move(placement), std::move(local), std::move(rail),
      std::move(flat), std::move(rail_link), std::move(roll_call));
}

}  // namespace c10d_func
