#pragma once
// Where a chunk's members are, for the hierarchy: which host each member is on, which members
// each host holds, and whether the members' numbering follows the hosts. Torch-free (the
// GoogleTest binary checks it without libtorch).
#include <cstdint>
#include <string>
#include <vector>

namespace c10d_func {

// Hosts in order of their first member, each host's members (as indices in the chunk) in chunk
// order.
struct HostPlacement {
  std::vector<std::vector<int64_t>> hosts;
  std::vector<int64_t> host_of;      // chunk index -> host
  std::vector<int64_t> local_index;  // chunk index -> index among its host's members
  // Members numbered host by host, as torchrun numbers them (0, 1 | 2, 3, not 0, 2 | 1, 3):
  // each host holds one contiguous run of chunk indices, so its members' blocks of a gathered
  // or scattered buffer are one contiguous run too.
  bool host_major = false;

  // Every host holds as many of the chunk's members.
  bool even() const;
};

// The placement of the members whose host identities are `host_ids` (in chunk order).
HostPlacement place_on_hosts(const std::vector<std::string>& host_ids);

}  // namespace c10d_func
