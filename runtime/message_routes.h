#pragma once
// Where the functional point-to-point ops (isend, irecv, batch_p2p_ops) send and receive: the
// caller's chunk of (tag, ranks, group_size) and the message channels among its members
// (runtime/point_to_point.h), made on first use from the world's store. Unlike a collective, a
// message involves two members only, so resolving one never forms the chunk's communicator,
// which would wait for every member to arrive.
#include "runtime/group_registry.h"
#include "runtime/point_to_point.h"

#include <memory>
#include <string_view>

namespace c10d_func {

struct MessageRoute {
  // The group as errors name it; its communicator is null (messages have their own channels).
  std::shared_ptr<const ResolvedGroup> group;
  std::shared_ptr<PointToPoint> channels;
};

// The route of the calling process in the group. Raises, naming `op`, when the world is one that
// c10d_func does not rendezvous in (ranks as threads, a fake world).
MessageRoute message_route(std::string_view op, std::string_view tag, c10::ArrayRef<int64_t> ranks,
                           int64_t group_size);

// `peer` (an index in the group) must be another member than the caller.
void check_peer(std::string_view op, std::string_view arg, int64_t peer,
                const ResolvedGroup& group);

// Drops every route (shutdown, or a new world); messages already posted still complete.
void forget_message_routes();
// Drops the routes of `tag` alone (torch destroyed the group that `ptd:<name>` names).
void forget_message_routes(std::string_view tag);

}  // namespace c10d_func
