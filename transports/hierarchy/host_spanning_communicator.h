#pragma once
// HostSpanningCommunicator: what the communicators of a chunk spanning hosts share. The
// collectives that no step inside a host or over the hosts' links speeds up (reduce, large gathers
// and scatters, all_to_all and broadcast where the derived communicator has no better way) run on
// the across-hosts transport (Gloo) over every member, whose failures name the members that are
// gone; the others run their steps in issue order (steps_in_order.h), the first failure naming
// them too.
#include "transports/communicator.h"
#include "transports/hierarchy/steps_in_order.h"
#include "transports/missing_member_reports.h"
#include "transports/roll_call.h"

#include <memory>
#include <vector>

namespace c10d_func {

class HostSpanningCommunicator : public Communicator {
 public:
  HostSpanningCommunicator(std::shared_ptr<Communicator> flat,
                           const std::shared_ptr<FailureRollCall>& roll_call)
      : flat_(reporting_missing_members(std::move(flat), roll_call)), steps_(*this, roll_call) {}

  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    return on_flat([=, this] {
      return flat_->all_to_all(output, input, output_split_sizes, input_split_sizes);
    });
  }
  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    return on_flat([=, this] { return flat_->broadcast(buffer, root); });
  }
  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    return on_flat([=, this] { return flat_->reduce(buffer, root, reduce_op); });
  }
  // Small gathers and scatters run as the derived communicator's all_gather and broadcast where
  // runs_rooted_as_collectives(): one round over the hosts' links, where Gloo's pairs to or from
  // the root cost their rounds. A gather with an output up to kGatherAsAllGatherBytes: the
  // others' copies go to scratch; each host's blocks cross to every other host once, which for
  // the root's host is what a gather sends it. A scatter of an input up to
  // kScatterAsBroadcastBytes: the whole input to every member, each keeping its block. Larger,
  // the all_gather moves the bytes both ways and the broadcast every block to every host, where
  // Gloo's gather and scatter move each block once, towards or from the root (a derived
  // communicator may send a large scatter's or gather's blocks over its links instead:
  // links_carry_rooted_steps()). The path is chosen from what every member shares (the sizes,
  // the placement), never from a member's own tensors.
  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override;
  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override;

  // Measured on 2 hosts x 2 ranks over 10 Gb/s, back to back, against Gloo's gather and scatter
  // through c10d_func. gather as the all_gather: 64 B 0.27 against 0.91 ms, 1 MiB 0.82 against
  // 1.12, 8 MiB 6.0 against 3.7 (2 hosts x 1 rank: 1 MiB 0.48 against 0.52, 8 MiB 3.9 against
  // 3.6). scatter as the broadcast: 64 B 0.19 against 0.81 ms, 64 KiB 0.22 against 0.86, 1 MiB
  // 0.76 against 1.24 (after a barrier 1.33 against 1.00), 8 MiB 6.9 against 3.9.
  static constexpr int64_t kGatherAsAllGatherBytes = int64_t{1} << 20;
  static constexpr int64_t kScatterAsBroadcastBytes = int64_t{256} << 10;
  // Up to this many bytes of input, a larger scatter goes over the hosts' links where a derived
  // communicator has them; above, Gloo's scatter. Measured 2026-11-29 on 2 hosts x 2 ranks over
  // 10 Gb/s, back to back, the links against Gloo through c10d_func: 1 MiB 1.00 against 1.32 ms,
  // 4 MiB 2.3 against 3.0, 8 MiB 3.9-4.1 against 4.7-5.1, 16 MiB 9.0 against 9.5-9.8, 32 MiB
  // 19.5 against 18.5, 64 MiB 40.2 against 39.2 (2 x 1: 4 MiB 1.8 against 2.4, 16 MiB 8.4
  // against 8.8, 64 MiB 40.1 against 36.1). Above 16 MiB the host's step after the link, in
  // series, and one TCP stream where Gloo's pairs run one per member cost more than they save.
  // A gather larger than kGatherAsAllGatherBytes goes over the links at every size: its host
  // step runs before the link, and Gloo's gather slows from 32 MiB (measured 2026-11-29, 2 x 2
  // back to back: 2 MiB 1.7 against Gloo through c10d_func 2.6 ms, 16 MiB 10.2-10.5 against
  // 13.7-14.1, 32 MiB 19.9 against 34.0, 64 MiB 41.6 against 65.7 (classic Gloo 53.5); 2 x 1:
  // 8 MiB 3.9 against 4.8, 64 MiB 36.9 against 58.0).
  static constexpr int64_t kScatterOverLinksBytes = int64_t{16} << 20;

 protected:
  // Whether gather and scatter may run as this communicator's all_gather and broadcast.
  virtual bool runs_rooted_as_collectives() const { return false; }
  // Whether a gather larger than kGatherAsAllGatherBytes, and a scatter between that and
  // kScatterOverLinksBytes, run as gather_over_links and scatter_over_links (the same answer on
  // every member). Those take `output` of gather and `input` of scatter on the root only, and
  // run under the op's StepDetail.
  virtual bool links_carry_rooted_steps() const { return false; }
  virtual Completion gather_over_links(const at::Tensor& output, const at::Tensor& input,
                                       int64_t root);
  virtual Completion scatter_over_links(const at::Tensor& output, const at::Tensor& input,
                                        int64_t root);

  // `issue`, a collective on flat_, in issue order with the queued collectives: every call on
  // flat_ goes through here (StepsInOrder::in_order says why).
  Completion on_flat(std::function<Completion()> issue) {
    return steps_.in_order(std::move(issue));
  }

  std::shared_ptr<Communicator> flat_;  // every member, across hosts; failures name the missing
  // The derived communicator's destructor stops it first, while the parts its steps use live.
  StepsInOrder steps_;
};

}  // namespace c10d_func
