// See host_placement.h.
#include "transports/hierarchy/host_placement.h"

#include <algorithm>
#include <map>

namespace c10d_func {

bool HostPlacement::even() const {
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const auto& host) { return host.size() == hosts.front().size(); });
}

HostPlacement place_on_hosts(const std::vector<std::string>& host_ids) {
  HostPlacement placement;
  std::map<std::string, int64_t> host_number;
  for (size_t m = 0; m < host_ids.size(); ++m) {
    auto [it, added] =
        host_number.emplace(host_ids[m], static_cast<int64_t>(placement.hosts.size()));
    if (added) {
      placement.hosts.emplace_back();
    }
    placement.host_of.push_back(it->second);
    placement.local_index.push_back(static_cast<int64_t>(placement.hosts[it->second].size()));
    placement.hosts[it->second].push_back(static_cast<int64_t>(m));
  }
  // Hosts are numbered by their first member, so host by host means every index in turn.
  int64_t next = 0;
  placement.host_major = true;
  for (const auto& members : placement.hosts) {
    for (const int64_t member : members) {
      placement.host_major = placement.host_major && member == next++;
    }
  }
  return placement;
}

}  // namespace c10d_func
