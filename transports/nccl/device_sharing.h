#pragma once
// NCCL refuses two ranks of one communicator on one GPU (ncclCommInitRankConfig then fails with
// "invalid usage", at once). The members of an NCCL chunk compare their devices' identities
// before creating it, so the error names the ranks that share a device and says what to do.
// Torch-free: the rule is tested on its own (tests/cpp/device_sharing_test.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace c10d_func {

// `device_ids[i]` identifies member i's GPU (its UUID), `members[i]` is its global rank. Returns
// the message for the first GPU held by more than one member, or nothing when all differ.
std::optional<std::string> shared_device_problem(const std::vector<std::string>& device_ids,
                                                 const std::vector<int64_t>& members);

}  // namespace c10d_func
