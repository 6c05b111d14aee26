// See host_spanning_communicator.h.
#include "transports/hierarchy/host_spanning_communicator.h"

#include <ATen/ATen.h>

#include "transports/call_scope.h"

namespace c10d_func {

Completion HostSpanningCommunicator::gather(const at::Tensor& output, const at::Tensor& input,
                                            int64_t root) {
  const bool root_here = rank() == root;
  if (!runs_rooted_as_collectives() || input.numel() == 0 ||
      size() * input.nbytes() > kGatherAsAllGatherBytes || (root_here && !output.is_contiguous())) {
    return flat_->gather(output, input, root);
  }
  StepDetail agreed(StepDetail::of_root("gather", root));  // members naming other roots fail
  return all_gather(root_here ? output : new_output({size() * input.numel()}, input.options()),
                    input);
}

Completion HostSpanningCommunicator::scatter(const at::Tensor& output, const at::Tensor& input,
                                             int64_t root) {
  const bool root_here = rank() == root;
  if (!runs_rooted_as_collectives() || output.numel() == 0 || !output.is_contiguous() ||
      size() * output.nbytes() > kScatterAsBroadcastBytes ||
      (root_here && !input.is_contiguous())) {
    return flat_->scatter(output, input, root);
  }
  // The root broadcasts its input as it is (a broadcast leaves the root's buffer unchanged); the
  // others receive the whole of it into a block only this collective holds.
  const int64_t block = output.numel();
  const at::Tensor whole =
      root_here ? input.view(-1) : new_output({size() * block}, output.options());
  const at::Tensor mine = whole.narrow(0, rank() * block, block).view(output.sizes());
  StepDetail agreed(StepDetail::of_root("scatter", root));
  return then_run(broadcast(whole, root), output, {whole}, [output, mine] { output.copy_(mine); });
}

}  // namespace c10d_func
