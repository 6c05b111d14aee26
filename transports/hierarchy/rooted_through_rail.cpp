// See rooted_through_rail.h.
#include "transports/hierarchy/rooted_through_rail.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "transports/hierarchy/steps_in_order.h"

namespace c10d_func {
namespace {

// How the blocks lie: how many hosts and members per host, and the root's host and local index.
struct RootOnRails {
  int64_t hosts;
  int64_t per_host;
  int64_t root_host;
  int64_t root_local;
};

// `block`: this member's block (scatter's output, gather's input).
RootOnRails root_on_rails(const char* op, const at::Tensor& block, int64_t root,
                          const HostPlacement& placement, const Communicator& local) {
  TORCH_INTERNAL_ASSERT(placement.even() && placement.host_major && block.is_contiguous(), op,
                        " through the rail: needs even, host-major hosts and a contiguous block");
  return {static_cast<int64_t>(placement.hosts.size()), local.size(), placement.host_of[root],
          placement.local_index[root]};
}

}  // namespace

void scatter_through_rail(const at::Tensor& output, const at::Tensor& input, int64_t root,
                          const HostPlacement& placement, int64_t rank, Communicator& local,
                          RailLink& link) {
  const auto [hosts, per_host, root_host, root_local] =
      root_on_rails("scatter", output, root, placement, local);
  // Host h's members' blocks, in local order: on the root, row h of its input; elsewhere, on the
  // member of the root's local index, what the link brings (in the host's symmetric memory, where
  // the host's members read their blocks in place).
  at::Tensor host_part;
  if (rank == root) {
    const at::Tensor rows = input.view({hosts, per_host * output.numel()});
    link.scatter(rows.unbind(0), at::Tensor(), root_host);
    host_part = rows[root_host];
  } else if (placement.local_index[rank] == root_local) {
    host_part = local.new_output({per_host * output.numel()}, output.options());
    link.scatter({}, host_part, root_host);
  } else {
    link.compare_rooted(static_cast<size_t>(per_host) * output.nbytes());
  }
  wait_for(local.scatter(output, host_part, root_local));
}

void gather_through_rail(const at::Tensor& output, const at::Tensor& input, int64_t root,
                         const HostPlacement& placement, int64_t rank, Communicator& local,
                         RailLink& link) {
  const auto [hosts, per_host, root_host, root_local] =
      root_on_rails("gather", input, root, placement, local);
  // Host h's members' blocks, in local order: on the root, row h of its output; elsewhere, on
  // the member of the root's local index, gathered in the host's memory and sent on.
  if (rank == root) {
    const at::Tensor rows = output.view({hosts, per_host * input.numel()});
    wait_for(local.gather(rows[root_host], input, root_local));
    link.gather(at::Tensor(), rows.unbind(0), root_host);
  } else if (placement.local_index[rank] == root_local) {
    const at::Tensor host_part = local.new_output({per_host * input.numel()}, input.options());
    wait_for(local.gather(host_part, input, root_local));
    link.gather(host_part, {}, root_host);
  } else {
    wait_for(local.gather(at::Tensor(), input, root_local));
    link.compare_rooted(static_cast<size_t>(per_host) * input.nbytes());
  }
}

}  // namespace c10d_func
