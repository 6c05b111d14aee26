// See host_spanning_communicator.h.
#include "transports/hierarchy/host_spanning_communicator.h"

#include <ATen/ATen.h>

#include "transports/call_scope.h"

namespace c10d_func {

Completion HostSpanningCommunicator::gather(const at::Tensor& output, const at::Tensor& input,
                                            int64_t root) {
  const bool root_here = rank() == root;
  const int64_t bytes = size() * input.nbytes();
  const bool as_all_gather =
      runs_rooted_as_collectives() && input.numel() > 0 && bytes <= kGatherAsAllGatherBytes;
  const bool over_links = links_carry_rooted_steps() && bytes > kGatherAsAllGatherBytes;
  if (!as_all_gather && !over_links) {
    return on_flat([=, this] { return flat_->gather(output, input, root); });
  }
  // Chosen from what every member shares (sizes, placement): one choosing by its own tensors
  // would wait on Gloo for members gone the other way.
  StepDetail agreed(StepDetail::of_root("gather", root));  // members naming other roots fail
  if (over_links) {
    return gather_over_links(output, input, root);
  }
  return all_gather(root_here ? output : new_output({size() * input.numel()}, input.options()),
                    input);
}

Completion HostSpanningCommunicator::scatter(const at::Tensor& output, const at::Tensor& input,
                                             int64_t root) {
  const bool root_here = rank() == root;
  const int64_t bytes = size() * output.nbytes();
  const bool as_broadcast =
      runs_rooted_as_collectives() && output.numel() > 0 && bytes <= kScatterAsBroadcastBytes;
  const bool over_links = links_carry_rooted_steps() && bytes > kScatterAsBroadcastBytes &&
                          bytes <= kScatterOverLinksBytes;
  if (!as_broadcast && !over_links) {
    return on_flat([=, this] { return flat_->scatter(output, input, root); });
  }
  // Chosen from what every member shares, as for gather.
  StepDetail agreed(StepDetail::of_root("scatter", root));  // members naming other roots fail
  if (over_links) {
    return scatter_over_links(output, input, root);
  }
  // The root broadcasts its input as it is (a broadcast leaves the root's buffer unchanged); the
  // others receive the whole of it into a block only this collective holds.
  const int64_t block = output.numel();
  const at::Tensor sent =
      root_here ? input.view(-1) : new_output({size() * block}, output.options());
  const at::Tensor mine = sent.narrow(0, rank() * block, block).view(output.sizes());
  return then_run(broadcast(sent, root), output, {sent}, [output, mine] { output.copy_(mine); });
}

Completion HostSpanningCommunicator::gather_over_links(const at::Tensor& output,
                                                       const at::Tensor& input, int64_t root) {
  TORCH_INTERNAL_ASSERT(false, backend_name(), ": a gather over links it does not have");
}

Completion HostSpanningCommunicator::scatter_over_links(const at::Tensor& output,
                                                        const at::Tensor& input, int64_t root) {
  TORCH_INTERNAL_ASSERT(false, backend_name(), ": a scatter over links it does not have");
}

}  // namespace c10d_func
