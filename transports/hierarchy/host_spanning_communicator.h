#pragma once
// HostSpanningCommunicator: what the communicators of a chunk spanning hosts share. The
// collectives that no step inside a host or over the hosts' links speeds up (scatter; reduce,
// gather, all_to_all and broadcast where the derived communicator has no better way) run on the
// across-hosts transport (Gloo) over every member, whose failures name the members that are
// gone; the others run their steps in issue order (steps_in_order.h), the first failure naming
// them too.
#include "transports/communicator.h"
#include "transports/hierarchy/steps_in_order.h"
#include "transports/missing_member_reports.h"
#include "transports/roll_call.h"

#include <memory>
#include <vector>

namespace c10d_func {

// A gather with an output up to this size runs as the all_gather (hierarchical, or over the hosts'
// link): one round, where Gloo's gather takes longer for small messages. Above it the all_gather
// moves the bytes both ways where a gather moves them towards the root alone, and loses to Gloo's
// gather (measured on 2 hosts x 2 ranks over 10 Gb/s, back to back, against Gloo's gather: 64 B
// 0.27 against 0.91 ms, 1 MiB 0.82 against 1.12, 8 MiB 6.0 against 3.7; 2 hosts x 1 rank: 1 MiB
// 0.48 against 0.52, 8 MiB 3.9 against 3.6).
constexpr int64_t kGatherAsAllGatherBytes = int64_t{1} << 20;

// Whether an all_to_all's split sizes (rows of dim 0 per member; empty: equal) give every one of
// `members` the same number of the `rows`: the case the steps between hosts serve.
inline bool equal_blocks(const std::vector<int64_t>& splits, int64_t rows, int64_t members) {
  for (const int64_t split : splits) {
    if (split * members != rows) {
      return false;
    }
  }
  return rows % members == 0;
}

class HostSpanningCommunicator : public Communicator {
 public:
  HostSpanningCommunicator(std::shared_ptr<Communicator> flat,
                           const std::shared_ptr<FailureRollCall>& roll_call)
      : flat_(reporting_missing_members(std::move(flat), roll_call)), steps_(*this, roll_call) {}

  Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                        std::vector<int64_t> output_split_sizes,
                        std::vector<int64_t> input_split_sizes) override {
    return flat_->all_to_all(output, input, std::move(output_split_sizes),
                             std::move(input_split_sizes));
  }
  Completion broadcast(const at::Tensor& buffer, int64_t root) override {
    return flat_->broadcast(buffer, root);
  }
  Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) override {
    return flat_->reduce(buffer, root, reduce_op);
  }
  Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    return flat_->gather(output, input, root);
  }
  Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) override {
    return flat_->scatter(output, input, root);
  }

 protected:
  std::shared_ptr<Communicator> flat_;  // every member, across hosts; failures name the missing
  // The derived communicator's destructor stops it first, while the parts its steps use live.
  StepsInOrder steps_;
};

}  // namespace c10d_func
