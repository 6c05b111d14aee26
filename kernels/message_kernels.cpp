// The point-to-point kernels (isend, irecv, batch_p2p_ops), for any device with a transport.
// A message runs on the channel of its (sender, receiver, msg_tag) inside the caller's chunk
// (runtime/message_routes.h), never on the chunk's communicator: only the two members of a message
// take part. Sends read a private copy (the caller, or inductor reusing a buffer, may write the
// tensor as soon as the op returns); a receive writes a fresh output. Both are pending until
// wait_tensor, like collectives: isend's empty output once the message has left, irecv's once
// it has arrived.
#include <ATen/ATen.h>

#include "ops/op_signatures.h"
#include "ops/tensor_checks.h"
#include "runtime/collective_call.h"
#include "runtime/message_routes.h"

#include <string_view>

namespace c10d_func {
namespace {

// A posted message: the op's output and the completion it stays pending on.
struct Posted {
  at::Tensor output;
  Completion done;
};

Posted post_send(const MessageRoute& route, const at::Tensor& self, int64_t dst, int64_t msg_tag) {
  return {at::empty({0}, self.options()),
          route.channels->send(self.clone(at::MemoryFormat::Contiguous), dst, msg_tag)};
}

Posted post_receive(const MessageRoute& route, const at::Tensor& self, int64_t src,
                    int64_t msg_tag) {
  at::Tensor output = at::empty_like(self, at::MemoryFormat::Contiguous);
  Completion done = route.channels->recv(output, src, msg_tag);
  return {std::move(output), std::move(done)};
}

at::Tensor record(std::string_view op, const MessageRoute& route, Posted posted) {
  record_output(op, route.group, posted.output, posted.done);
  return std::move(posted.output);
}

// The route of a single message to or from `peer` (argument `arg`), every argument checked.
MessageRoute route_with(std::string_view op, std::string_view arg, int64_t peer,
                        c10::string_view tag, RankList ranks, int64_t group_size) {
  check_group_shape(op, ranks, group_size);
  check_group_index(op, arg, peer, group_size);
  MessageRoute route = message_route(op, tag, ranks, group_size);
  check_peer(op, arg, peer, *route.group);
  return route;
}

}  // namespace

at::Tensor isend(const at::Tensor& self, int64_t dst, int64_t msg_tag, c10::string_view tag,
                 RankList ranks, int64_t group_size) {
  constexpr std::string_view kOp = "isend";
  const MessageRoute route = route_with(kOp, "dst", dst, tag, ranks, group_size);
  return record(kOp, route, post_send(route, self, dst, msg_tag));
}

at::Tensor irecv(const at::Tensor& self, int64_t src, int64_t msg_tag, c10::string_view tag,
                 RankList ranks, int64_t group_size) {
  constexpr std::string_view kOp = "irecv";
  const MessageRoute route = route_with(kOp, "src", src, tag, ranks, group_size);
  return record(kOp, route, post_receive(route, self, src, msg_tag));
}

std::vector<at::Tensor> batch_p2p_ops(std::vector<std::string> op_list, at::IntArrayRef peer_list,
                                      at::IntArrayRef msg_tag_list, at::TensorList tensors,
                                      c10::string_view tag, RankList ranks, int64_t group_size) {
  constexpr std::string_view kOp = "batch_p2p_ops";
  check_group_shape(kOp, ranks, group_size);
  check_message_lists(kOp, op_list, peer_list.size(), msg_tag_list.size(), tensors.size());
  check_same_device(kOp, tensors);
  for (const int64_t peer : peer_list) {
    check_group_index(kOp, "peer_list", peer, group_size);
  }
  std::vector<at::Tensor> outputs;
  if (tensors.empty()) {
    return outputs;
  }
  const MessageRoute route = message_route(kOp, tag, ranks, group_size);
  for (const int64_t peer : peer_list) {
    check_peer(kOp, "peer_list", peer, *route.group);
  }
  // Every message is posted before any is recorded (C10D_FUNC_BLOCKING waits as it records),
  // each on its own channel, so a batch that sends to and receives from the same members
  // cannot deadlock whatever its order.
  std::vector<Posted> posted;
  posted.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    posted.push_back(op_list[i] == "isend"
                         ? post_send(route, tensors[i], peer_list[i], msg_tag_list[i])
                         : post_receive(route, tensors[i], peer_list[i], msg_tag_list[i]));
  }
  for (auto& message : posted) {
    outputs.push_back(record(kOp, route, std::move(message)));
  }
  return outputs;
}

}  // namespace c10d_func
