// What a group's members share is named alike on every member, whatever device index each one
// serves: one rank per GPU runs on cuda:0 in one process and cuda:1 in the next, and a store
// prefix or a flight-recorder group name holding the index would part them (each would wait
// for the others under its own prefix until the timeout). Checked without a GPU: the names are
// made from c10::Device values alone.
#include "runtime/group_registry.h"
#include "transports/rendezvous.h"

#include <gtest/gtest.h>

namespace c10d_func {
namespace {

Chunk member(int64_t index) {
  Chunk chunk;
  chunk.members = {0, 1};
  chunk.index = index;
  return chunk;
}

TEST(SharedNames, DeviceIsNamedByTypeAlone) {
  EXPECT_EQ(shared_device(c10::Device(c10::kCUDA, 0)), "cuda");
  EXPECT_EQ(shared_device(c10::Device(c10::kCUDA, 7)), "cuda");
  EXPECT_EQ(shared_device(c10::Device(c10::kCUDA)), "cuda");
  EXPECT_EQ(shared_device(c10::Device(c10::kCPU)), "cpu");
}

TEST(SharedNames, MembersOnDifferentDeviceIndicesMeetUnderOnePrefix) {
  const std::string on_0 =
      rendezvous_prefix(c10::Device(c10::kCUDA, 0), "nccl", "tp", member(0), 0);
  const std::string on_1 =
      rendezvous_prefix(c10::Device(c10::kCUDA, 1), "nccl", "tp", member(1), 0);
  EXPECT_EQ(on_0, on_1);
  EXPECT_EQ(on_0, "c10d_func/cuda/nccl/tp/[0, 1]/0");
  // What does tell formations apart still does: transport, tag, members, formation.
  EXPECT_NE(on_0, rendezvous_prefix(c10::Device(c10::kCUDA, 0), "gloo", "tp", member(0), 0));
  EXPECT_NE(on_0, rendezvous_prefix(c10::Device(c10::kCUDA, 0), "nccl", "dp", member(0), 0));
  EXPECT_NE(on_0, rendezvous_prefix(c10::Device(c10::kCUDA, 0), "nccl", "tp", member(0), 1));
  EXPECT_NE(on_0, rendezvous_prefix(c10::Device(c10::kCPU), "nccl", "tp", member(0), 0));
}

TEST(SharedNames, FlightRecorderNamesTheGroupAlikeOnEveryMember) {
  const GroupIdentity on_0 = chunk_identity(c10::Device(c10::kCUDA, 0), "tp", member(0));
  const GroupIdentity on_1 = chunk_identity(c10::Device(c10::kCUDA, 1), "tp", member(1));
  EXPECT_EQ(on_0.name, on_1.name);
  EXPECT_EQ(on_0.name, "c10d_func/cuda/tp/[0, 1]");
  EXPECT_EQ(on_0.rank, 0);
  EXPECT_EQ(on_1.rank, 1);
}

}  // namespace
}  // namespace c10d_func
