// See linked_hosts_communicator.h.
#include "transports/hierarchy/linked_hosts_communicator.h"

#include <ATen/ATen.h>

#include "transports/call_scope.h"
#include "transports/hierarchy/host_spanning_communicator.h"
#include "transports/hierarchy/two_step_all_to_all.h"
#include "transports/reduction_staging.h"

namespace c10d_func {
namespace {

class LinkedHostsCommunicator final : public HostSpanningCommunicator {
 public:
  LinkedHostsCommunicator(int64_t rank, std::shared_ptr<Communicator> flat,
                          std::unique_ptr<RailLink> link,
                          const std::shared_ptr<FailureRollCall>& roll_call)
      : HostSpanningCommunicator(std::move(flat), roll_call), rank_(rank), link_(std::move(link)) {}

  ~LinkedHostsCommunicator() override { steps_.stop(); }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return link_->size(); }
  std::string backend_name() const override { return "link+gloo"; }
  void set_timeout(std::chrono::milliseconds timeout) override {
    flat_->set_timeout(timeout);
    link_->set_timeout(timeout);
  }

  Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) override {
    if (buffer.numel() == 0) {
      return completed();
    }
    if (!link_->serves_all_reduce(buffer.nbytes())) {
      return on_flat([=, this] { return flat_->all_reduce(buffer, reduce_op); });
    }
    auto whole = [this, buffer, reduce_op] {
      at::AutoDispatchBelowADInplaceOrView below;
      const auto staged = stage_reduction(buffer, reduce_op, /*transport_averages_floats=*/false);
      link_->all_reduce(staged.wire.view(-1), staged.wire_op);
      staged.finish(buffer, size());
    };
    // The limit is on the wire: int16 and the wider unsigned types travel widened.
    if (wire_bytes(buffer.scalar_type(), buffer.nbytes()) > RailLink::kBegunBytes ||
        !FunctionalOpCall::active()) {
      return steps_.submit(std::move(whole));
    }
    // Small, from a functional op, with nothing queued: this member's part goes to the peers in
    // the call, and the rest (receiving theirs) waits for the waiter, with no wake-up of the
    // progress thread when it all went out (no peer depends on this process for it;
    // RailLink::begin_all_reduce). Classic calls keep the progress thread: their Futures are
    // waited directly and bounded by the group's timeout.
    return steps_.submit_begun(
        [this, buffer, reduce_op]() -> TaskQueue::Rest {
          at::AutoDispatchBelowADInplaceOrView below;
          auto staged = std::make_shared<StagedReduction>(
              stage_reduction(buffer, reduce_op, /*transport_averages_floats=*/false));
          const at::Tensor wire = staged->wire.view(-1);
          auto begun = link_->begin_all_reduce(wire);
          const bool quiet = begun->all_sent();
          return {[this, buffer, staged, wire, begun = std::move(begun)] {
                    at::AutoDispatchBelowADInplaceOrView below;
                    link_->finish_all_reduce(*begun, wire, staged->wire_op);
                    staged->finish(buffer, size());
                  },
                  quiet};
        },
        std::move(whole));
  }

  // reduce runs as the all_reduce where the link serves it (only the root's result is kept):
  // one exchange, where Gloo's reduce takes several rounds.
  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    if (link_->serves_all_reduce(buffer.nbytes())) {
      StepDetail agreed(StepDetail::of_root("reduce", root));  // members naming other roots fail
      return all_reduce(buffer, reduce_op);
    }
    return HostSpanningCommunicator::reduce(buffer, root, reduce_op);
  }

  // gather and scatter of small messages as the all_gather and the broadcast over the link
  // (HostSpanningCommunicator).
  bool runs_rooted_as_collectives() const override { return true; }

  // Above that, a scatter up to kScatterOverLinksBytes of input goes over the link from the root,
  // each member's block straight into its output: one message per member, as Gloo's scatter
  // sends, with no thread of Gloo's; larger, Gloo's scatter. Likewise a gather of any size above
  // that: each member's block straight into the root's output (HostSpanningCommunicator says
  // why).
  bool links_carry_rooted_steps() const override { return true; }
  Completion scatter_over_links(const at::Tensor& output, const at::Tensor& input,
                                int64_t root) override {
    return steps_.submit([this, output, input, root] {
      at::AutoDispatchBelowADInplaceOrView below;
      if (rank_ != root) {
        link_->scatter({}, output.view(-1), root);
        return;
      }
      const std::vector<at::Tensor> blocks = input.view({size(), -1}).unbind(0);
      link_->scatter(blocks, at::Tensor(), root);
      output.view(-1).copy_(blocks[root]);
    });
  }
  Completion gather_over_links(const at::Tensor& output, const at::Tensor& input,
                               int64_t root) override {
    return steps_.submit([this, output, input, root] {
      at::AutoDispatchBelowADInplaceOrView below;
      if (rank_ != root) {
        link_->gather(input.view(-1), {}, root);
        return;
      }
      const std::vector<at::Tensor> blocks = output.view({size(), -1}).unbind(0);
      blocks[root].copy_(input.view(-1));
      link_->gather(at::Tensor(), blocks, root);
    });
  }

  Completion all_gather(const at::Tensor& output, const at::Tensor& input) override {
    if (input.numel() == 0) {
      return on_flat([=, this] { return flat_->all_gather(output, input); });
    }
    return steps_.submit([this, output, input] {
      at::AutoDispatchBelowADInplaceOrView below;
      // Member m is on host m: its block is row m of the output, received there.
      link_->all_gather(input.contiguous().view(-1), output.view({size(), input.numel()}));
    });
  }

  Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                            ReduceOp reduce_op) override {
    if (size() != 2 || input.numel() == 0) {
      return on_flat([=, this] { return flat_->reduce_scatter(output, input, reduce_op); });
    }
    return steps_.submit([this, output, input, reduce_op] {
      at::AutoDispatchBelowADInplaceOrView below;
      const auto staged_out = stage_reduction(output, reduce_op, false);
      const auto staged_in = stage_reduction(input, reduce_op, false);
      const at::Tensor blocks = staged_in.wire.reshape({2, -1});
      const at::Tensor mine = staged_out.wire.view(-1);
      // This member keeps its own block, folding in the peer's part of it; it sends the peer's.
      mine.copy_(blocks[rank_]);
      link_->reduce_with_peer(blocks[1 - rank_], mine, staged_out.wire_op);
      staged_out.finish(output, size());
    });
  }

  // On the link at every size, with or without split sizes: each member's part for each other
  // straight from its place in the input into its place in the receiver's output, in one round.
  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    return steps_.submit([this, output, input, output_split_sizes, input_split_sizes] {
      at::AutoDispatchBelowADInplaceOrView below;
      // Member m is on host m: its part of the input goes to it, its part of the output comes
      // from it.
      const std::vector<at::Tensor> sends = parts_of(input, input_split_sizes);
      const std::vector<at::Tensor> receives = parts_of(output, output_split_sizes);
      link_->all_to_all(sends, receives);
      // After the link's round, so that the peers are not kept waiting for a part this member
      // would never send.
      TORCH_CHECK_VALUE(sends[rank_].nbytes() == receives[rank_].nbytes(),
                        "all_to_all: this member's split sizes keep ", sends[rank_].nbytes(),
                        " bytes of its input for itself and expect ", receives[rank_].nbytes(),
                        " from itself");
      receives[rank_].copy_(sends[rank_]);
    });
  }

  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    if (buffer.numel() == 0 || !buffer.is_contiguous()) {
      return on_flat([=, this] { return flat_->broadcast(buffer, root); });
    }
    return steps_.submit([this, buffer, root] {
      at::AutoDispatchBelowADInplaceOrView below;
      link_->broadcast(buffer, root);
    });
  }

 private:
  int64_t rank_;
  std::unique_ptr<RailLink> link_;  // used by whichever thread runs the steps
};

}  // namespace

std::shared_ptr<Communicator> make_linked_hosts(int64_t rank, std::shared_ptr<Communicator> flat,
                                                std::unique_ptr<RailLink> link,
                                                std::shared_ptr<FailureRollCall> roll_call) {
  return std::make_shared<LinkedHostsCommunicator>(rank, std::move(flat), std::move(link),
                                                   roll_call);
}

}  // namespace c10d_func
