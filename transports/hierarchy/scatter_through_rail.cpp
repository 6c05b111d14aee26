// See scatter_through_rail.h.
#include "transports/hierarchy/scatter_through_rail.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "transports/hierarchy/steps_in_order.h"

namespace c10d_func {

void scatter_through_rail(const at::Tensor& output, const at::Tensor& input, int64_t root,
                          const HostPlacement& placement, int64_t rank, Communicator& local,
                          RailLink& link) {
  TORCH_INTERNAL_ASSERT(placement.even() && placement.host_major && output.is_contiguous(),
                        "scatter through the rail: needs even, host-major hosts");
  const int64_t hosts = static_cast<int64_t>(placement.hosts.size());
  const int64_t per_host = local.size();
  const int64_t root_host = placement.host_of[root];
  const int64_t root_local = placement.local_index[root];
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

}  // namespace c10d_func
