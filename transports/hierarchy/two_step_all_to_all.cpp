// See two_step_all_to_all.h.
#include "transports/hierarchy/two_step_all_to_all.h"

#include "transports/hierarchy/steps_in_order.h"

#include <ATen/ATen.h>

#include <vector>

namespace c10d_func {

void all_to_all_in_two_steps(const at::Tensor& output, const at::Tensor& input,
                             const HostPlacement& placement, int64_t rank, Communicator& local,
                             RailLink& link) {
  const int64_t n = static_cast<int64_t>(placement.host_of.size());
  const int64_t hosts = static_cast<int64_t>(placement.hosts.size());
  const int64_t per_host = local.size();
  const at::Tensor blocks = input.view({n, -1});  // block j: for member j
  const int64_t block = blocks.size(1);
  // Inside the host: local member l gets, from each member of this host, its blocks for the
  // members of local index l on every host ([local source][host][block] after).
  auto by_local = local.new_output({per_host, hosts, block}, input.options());
  for (int64_t l = 0; l < per_host; ++l) {
    for (int64_t h = 0; h < hosts; ++h) {
      by_local[l][h].copy_(blocks[placement.hosts[h][l]]);
    }
  }
  auto from_local = local.new_output({per_host, hosts, block}, input.options());
  const std::vector<int64_t> one_row_each(per_host, 1);
  wait_for(local.all_to_all(from_local, by_local, one_row_each, one_row_each));
  // Along this member's rail: to host h, this host's blocks for its member of this local index;
  // from host h, that host's blocks for this member ([host][local source][block]). This host's
  // own row stays where it is: the link leaves it alone, and it is placed from there.
  const at::Tensor to_hosts = from_local.transpose(0, 1).contiguous();
  const at::Tensor from_hosts = at::empty_like(to_hosts);
  link.all_to_all(to_hosts.unbind(0), from_hosts.unbind(0));
  const int64_t here = placement.host_of[rank];
  const at::Tensor out = output.view({n, -1});
  for (int64_t h = 0; h < hosts; ++h) {
    const at::Tensor& from = h == here ? to_hosts : from_hosts;
    for (int64_t l = 0; l < per_host; ++l) {
      out[placement.hosts[h][l]].copy_(from[h][l]);
    }
  }
}

}  // namespace c10d_func
