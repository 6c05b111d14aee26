// host_placement: which host each member of a chunk is on, from the members' host identities,
// and whether the numbering follows the hosts (the hierarchy's all_gather and reduce_scatter
// then read and write one contiguous run of the caller's buffer per host).
#include "transports/hierarchy/host_placement.h"

#include <gtest/gtest.h>

namespace c10d_func {
namespace {

using Members = std::vector<std::vector<int64_t>>;

TEST(HostPlacement, TorchrunNumberingIsHostMajor) {
  const HostPlacement placement = place_on_hosts({"a", "a", "b", "b"});
  EXPECT_EQ(placement.hosts, (Members{{0, 1}, {2, 3}}));
  EXPECT_EQ(placement.host_of, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(placement.local_index, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_TRUE(placement.host_major);
  EXPECT_TRUE(placement.even());
}

TEST(HostPlacement, AlternatingHostsAreNotHostMajor) {
  const HostPlacement placement = place_on_hosts({"a", "b", "a", "b"});
  EXPECT_EQ(placement.hosts, (Members{{0, 2}, {1, 3}}));
  EXPECT_EQ(placement.host_of, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(placement.local_index, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_FALSE(placement.host_major);
  EXPECT_TRUE(placement.even());
}

TEST(HostPlacement, HostsAreNumberedByTheirFirstMember) {
  // "b" holds member 0, so it is host 0, whatever its name sorts as.
  const HostPlacement placement = place_on_hosts({"b", "b", "a", "a", "c", "c"});
  EXPECT_EQ(placement.hosts, (Members{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_TRUE(placement.host_major);
}

TEST(HostPlacement, AHostReturningLaterBreaksHostMajor) {
  const HostPlacement placement = place_on_hosts({"a", "b", "b", "a"});
  EXPECT_EQ(placement.hosts, (Members{{0, 3}, {1, 2}}));
  EXPECT_FALSE(placement.host_major);
}

TEST(HostPlacement, UnevenHosts) {
  const HostPlacement placement = place_on_hosts({"a", "a", "a", "b"});
  EXPECT_EQ(placement.hosts, (Members{{0, 1, 2}, {3}}));
  EXPECT_EQ(placement.local_index, (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_TRUE(placement.host_major);
  EXPECT_FALSE(placement.even());
}

TEST(HostPlacement, OneMemberPerHost) {
  const HostPlacement placement = place_on_hosts({"a", "b", "c"});
  EXPECT_EQ(placement.hosts, (Members{{0}, {1}, {2}}));
  EXPECT_TRUE(placement.host_major);
  EXPECT_TRUE(placement.even());
}

}  // namespace
}  // namespace c10d_func
