#pragma once
// CollectiveCall: the steps every kernel shares once its own arguments are checked: validate the
// group against the world, find the caller's chunk and its communicator, and record outputs in
// the pending-work table so wait_tensor can find them.
#include <ATen/core/Tensor.h>

#include "ops/communicator.h"
#include "ops/group_spec.h"

#include <memory>
#include <string_view>

namespace c10d_func {

class CollectiveCall {
 public:
  // `inputs` give the device and, under C10D_FUNC_DEBUG=DETAIL, what the members compare.
  // `same_rows` is false where members may legitimately differ in dim 0 (all_to_all_single).
  CollectiveCall(std::string_view op, at::TensorList inputs, GroupSpec spec, bool same_rows = true);

  Communicator& communicator() const { return *communicator_; }
  const Chunk& chunk() const { return chunk_; }
  int64_t group_size() const { return spec_.group_size; }
  int64_t index() const { return chunk_.index; }

  // `output` stays pending until `completion` is done.
  void record(const at::Tensor& output, const Completion& completion) const;

 private:
  std::string op_;
  GroupSpec spec_;
  Chunk chunk_;
  std::shared_ptr<Communicator> communicator_;
};

} // namespace c10d_func
