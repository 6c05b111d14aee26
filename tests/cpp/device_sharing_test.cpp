// The NCCL formation's check that no two members share a GPU.
#include "transports/nccl/device_sharing.h"
#include "tests/cpp/test_support.h"

namespace c10d_func {
namespace {

TEST(DeviceSharing, DistinctDevicesPass) {
  EXPECT_FALSE(shared_device_problem({"GPU-a", "GPU-b", "GPU-c"}, {0, 1, 2}).has_value());
}

TEST(DeviceSharing, NamesTheRanksOnOneDeviceAndTheWayOut) {
  const auto problem = shared_device_problem({"GPU-a", "GPU-b", "GPU-a"}, {4, 5, 7});
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("ranks [4, 7] are on the same GPU (GPU-a)"), std::string::npos)
      << *problem;
  EXPECT_NE(problem->find("NCCL refuses two ranks"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("set_transport(\"gloo\", \"cuda\")"), std::string::npos) << *problem;
}

}  // namespace
}  // namespace c10d_func
