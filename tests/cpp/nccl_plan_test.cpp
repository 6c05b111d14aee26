// The NCCL transport's send/receive plans (nccl_plan.h), run on the CPU: every member's plan of
// one collective is executed against byte buffers the way NCCL pairs a group's point-to-point
// calls (the k-th send from a to b meets the k-th receive at b from a, same size), and every
// output is compared with the collective's definition. Uneven all_to_all splits, zero-length
// pieces, every root, 1 to 5 members.
#include "transports/nccl/nccl_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace c10d_func::nccl {
namespace {

using Bytes = std::vector<uint8_t>;

// Member m's input: bytes that say whose they are and where they were.
Bytes input_of(int64_t member, size_t size) {
  Bytes bytes(size);
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<uint8_t>(member * 41 + i * 7 + 1);
  }
  return bytes;
}

// Executes every member's plan: pairs each member's sends with its peers' receives in order,
// checks sizes and bounds, and copies. Returns the outputs (sized by the caller).
std::vector<Bytes> run(const std::vector<std::vector<Transfer>>& plans,
                       const std::vector<Bytes>& inputs, std::vector<Bytes> outputs) {
  const int64_t size = static_cast<int64_t>(plans.size());
  std::map<std::pair<int64_t, int64_t>, std::vector<Transfer>> sends, receives;
  for (int64_t member = 0; member < size; ++member) {
    for (const Transfer& transfer : plans[member]) {
      EXPECT_GT(transfer.bytes, 0u);
      EXPECT_TRUE(transfer.peer >= 0 && transfer.peer < size) << "peer " << transfer.peer;
      if (transfer.send) {
        EXPECT_LE(transfer.offset + transfer.bytes, inputs[member].size()) << "send past input";
        sends[{member, transfer.peer}].push_back(transfer);
      } else {
        EXPECT_LE(transfer.offset + transfer.bytes, outputs[member].size()) << "recv past output";
        receives[{transfer.peer, member}].push_back(transfer);
      }
    }
  }
  EXPECT_EQ(sends.size(), receives.size()) << "a send or a receive without its other side";
  for (const auto& [pair, sent] : sends) {
    const auto& received = receives[pair];
    EXPECT_EQ(sent.size(), received.size()) << pair.first << " -> " << pair.second;
    for (size_t k = 0; k < std::min(sent.size(), received.size()); ++k) {
      EXPECT_EQ(sent[k].bytes, received[k].bytes) << pair.first << " -> " << pair.second;
      const size_t bytes = std::min(sent[k].bytes, received[k].bytes);
      if (sent[k].offset + bytes <= inputs[pair.first].size() &&
          received[k].offset + bytes <= outputs[pair.second].size()) {
        std::copy_n(inputs[pair.first].begin() + sent[k].offset, bytes,
                    outputs[pair.second].begin() + received[k].offset);
      }
    }
  }
  return outputs;
}

TEST(NcclPlan, GatherPutsEveryMembersInputAtItsBlockOnTheRootOnly) {
  for (int64_t size = 1; size <= 5; ++size) {
    for (int64_t root = 0; root < size; ++root) {
      const size_t bytes = 12;
      std::vector<std::vector<Transfer>> plans;
      std::vector<Bytes> inputs, outputs;
      for (int64_t m = 0; m < size; ++m) {
        plans.push_back(gather_plan(m, size, root, bytes));
        inputs.push_back(input_of(m, bytes));
        outputs.emplace_back(bytes * size, 0);
      }
      const auto result = run(plans, inputs, outputs);
      for (int64_t m = 0; m < size; ++m) {
        Bytes expected(bytes * size, 0);
        if (m == root) {
          for (int64_t from = 0; from < size; ++from) {
            std::copy(inputs[from].begin(), inputs[from].end(), expected.begin() + from * bytes);
          }
        }
        EXPECT_EQ(result[m], expected) << "size " << size << " root " << root << " member " << m;
      }
    }
  }
}

TEST(NcclPlan, ScatterGivesEveryMemberItsBlockOfTheRootsInput) {
  for (int64_t size = 1; size <= 5; ++size) {
    for (int64_t root = 0; root < size; ++root) {
      const size_t bytes = 9;
      std::vector<std::vector<Transfer>> plans;
      std::vector<Bytes> inputs, outputs;
      for (int64_t m = 0; m < size; ++m) {
        plans.push_back(scatter_plan(m, size, root, bytes));
        inputs.push_back(input_of(m, bytes * size));  // read on the root only
        outputs.emplace_back(bytes, 0);
      }
      const auto result = run(plans, inputs, outputs);
      for (int64_t m = 0; m < size; ++m) {
        const Bytes expected(inputs[root].begin() + m * bytes,
                             inputs[root].begin() + (m + 1) * bytes);
        EXPECT_EQ(result[m], expected) << "size " << size << " root " << root << " member " << m;
      }
    }
  }
}

TEST(NcclPlan, EmptyGatherAndScatterMoveNothing) {
  EXPECT_TRUE(gather_plan(0, 3, 1, 0).empty());
  EXPECT_TRUE(scatter_plan(1, 3, 1, 0).empty());
}

// all_to_all by definition: member d's output is, in member order, the block of each source s's
// input that s addressed to d (s's input blocks in destination order).
std::vector<Bytes> all_to_all_reference(const std::vector<std::vector<int64_t>>& sent_rows,
                                        const std::vector<Bytes>& inputs, size_t row_bytes) {
  const size_t size = inputs.size();
  std::vector<Bytes> outputs(size);
  for (size_t d = 0; d < size; ++d) {
    for (size_t s = 0; s < size; ++s) {
      size_t start = 0;
      for (size_t k = 0; k < d; ++k) {
        start += sent_rows[s][k] * row_bytes;
      }
      outputs[d].insert(outputs[d].end(), inputs[s].begin() + start,
                        inputs[s].begin() + start + sent_rows[s][d] * row_bytes);
    }
  }
  return outputs;
}

TEST(NcclPlan, AllToAllWithUnevenAndEmptySplitsMatchesItsDefinition) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t size = 1 + trial % 5;
    const size_t row_bytes = 1 + trial % 6;
    // sent_rows[s][d]: rows member s sends member d (zeros included).
    std::vector<std::vector<int64_t>> sent_rows(size, std::vector<int64_t>(size));
    for (auto& row : sent_rows) {
      for (auto& rows : row) {
        rows = static_cast<int64_t>(random() % 4);
      }
    }
    std::vector<std::vector<Transfer>> plans;
    std::vector<Bytes> inputs, outputs;
    for (int64_t m = 0; m < size; ++m) {
      std::vector<int64_t> input_splits = sent_rows[m];
      std::vector<int64_t> output_splits(size);
      int64_t in_rows = 0;
      int64_t out_rows = 0;
      for (int64_t p = 0; p < size; ++p) {
        output_splits[p] = sent_rows[p][m];
        in_rows += input_splits[p];
        out_rows += output_splits[p];
      }
      plans.push_back(all_to_all_plan(size, output_splits, input_splits, row_bytes, row_bytes));
      inputs.push_back(input_of(m, in_rows * row_bytes));
      outputs.emplace_back(out_rows * row_bytes, 0);
    }
    EXPECT_EQ(run(plans, inputs, outputs), all_to_all_reference(sent_rows, inputs, row_bytes))
        << "trial " << trial;
  }
}

TEST(NcclPlan, AllToAllRowsOfDifferentWidthsOnEachSide) {
  // Each side's rows have their own width: 2 input rows of 4 bytes go to each peer, 1 output
  // row of 8 bytes comes from each, at offsets counted in each side's own rows.
  const auto plan = all_to_all_plan(2, {1, 1}, {2, 2}, 8, 4);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_TRUE(plan[0].send && plan[0].peer == 0 && plan[0].offset == 0 && plan[0].bytes == 8);
  EXPECT_TRUE(!plan[1].send && plan[1].peer == 0 && plan[1].offset == 0 && plan[1].bytes == 8);
  EXPECT_TRUE(plan[2].send && plan[2].peer == 1 && plan[2].offset == 8 && plan[2].bytes == 8);
  EXPECT_TRUE(!plan[3].send && plan[3].peer == 1 && plan[3].offset == 8 && plan[3].bytes == 8);
}

}  // namespace
}  // namespace c10d_func::nccl
