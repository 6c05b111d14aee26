// See device_sharing.h.
#include "transports/nccl/device_sharing.h"

#include "transports/rank_format.h"

#include <map>

namespace c10d_func {

std::optional<std::string> shared_device_problem(const std::vector<std::string>& device_ids,
                                                 const std::vector<int64_t>& members) {
  std::map<std::string, std::vector<int64_t>> holders;  // ordered: the first GPU is reported
  for (size_t i = 0; i < device_ids.size() && i < members.size(); ++i) {
    holders[device_ids[i]].push_back(members[i]);
  }
  for (const auto& [device, ranks] : holders) {
    if (ranks.size() > 1) {
      return "ranks " + format_ranks(ranks) + " are on the same GPU (" + device +
             "), and NCCL refuses two ranks of one communicator on one device. Give each rank "
             "its own GPU (torch.cuda.set_device(local_rank)), or run these ranks' CUDA "
             "collectives over Gloo: c10d_func.set_transport(\"gloo\", \"cuda\")";
    }
  }
  return std::nullopt;
}

}  // namespace c10d_func
