// Forming a chunk's communicator across hosts (make_hierarchical, hierarchical_communicator.h):
// where its members are, then its host's, rail's and every member's sub-communicators.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "transports/hierarchy/hierarchical_communicator.h"
#include "transports/hierarchy/host_placement.h"
#include "transports/hierarchy/linked_hosts_communicator.h"
#include "transports/hierarchy/rail_link.h"
#include "transports/missing_member_reports.h"
#include "transports/roll_call.h"

#include <algorithm>

namespace c10d_func {
namespace {

// The global ranks of the members on other hosts than the caller, for messages.
std::vector<int64_t> members_elsewhere(const HostPlacement& placement,
                                       const Rendezvous& rendezvous) {
  std::vector<int64_t> elsewhere;
  for (size_t m = 0; m < placement.host_of.size(); ++m) {
    if (placement.host_of[m] != placement.host_of[rendezvous.rank]) {
      elsewhere.push_back(rendezvous.members.at(m));
    }
  }
  return elsewhere;
}

// The rendezvous of the sub-group `indices` (chunk indices, in the sub-group's order) under
// `prefix`; the caller is at `position` in it.
Rendezvous sub_rendezvous(const Rendezvous& rendezvous, const std::string& prefix,
                          const std::vector<int64_t>& indices, int64_t position,
                          const std::string& what) {
  Rendezvous sub = rendezvous;
  sub.store = c10::make_intrusive<c10d::PrefixStore>(prefix, rendezvous.store);
  sub.rank = position;
  sub.size = static_cast<int64_t>(indices.size());
  sub.members.clear();
  for (const int64_t index : indices) {
    sub.members.push_back(rendezvous.members.at(index));
  }
  sub.group = rendezvous.group + " (" + what + ")";
  return sub;
}

}  // namespace

std::shared_ptr<Communicator> make_hierarchical(const Rendezvous& rendezvous,
                                                const std::vector<std::string>& host_ids,
                                                const CommunicatorFactory& local,
                                                const CommunicatorFactory& across_hosts) {
  HostPlacement placement = place_on_hosts(host_ids);
  const bool shares_a_host = std::any_of(placement.hosts.begin(), placement.hosts.end(),
                                         [](const auto& host) { return host.size() > 1; });
  const int64_t me = rendezvous.rank;
  std::vector<int64_t> everyone(placement.host_of.size());
  for (size_t m = 0; m < everyone.size(); ++m) {
    everyone[m] = static_cast<int64_t>(m);
  }
  // Every member forms in the same order: its host, its rail, then everyone.
  std::shared_ptr<Communicator> host, rail;
  std::unique_ptr<RailLink> rail_link;
  bool on_a_rail = false;  // uneven hosts: only their first members
  if (shares_a_host) {
    const int64_t h = placement.host_of[me];
    const int64_t l = placement.local_index[me];
    Rendezvous in_host = sub_rendezvous(rendezvous, "local/" + std::to_string(h) + "/",
                                        placement.hosts[h], l, "host " + std::to_string(h));
    in_host.one_ordered_caller = true;  // only the worker thread issues, waiting each in turn
    host = local(in_host);
    std::vector<int64_t> rail_members;
    const bool even = placement.even();
    if (even || l == 0) {
      on_a_rail = true;
      for (const auto& members : placement.hosts) {
        rail_members.push_back(members[l]);
      }
      const auto position = static_cast<int64_t>(
          std::find(rail_members.begin(), rail_members.end(), me) - rail_members.begin());
      const std::string name = "rail " + std::to_string(l);
      rail = across_hosts(sub_rendezvous(rendezvous, "rail/" + std::to_string(l) + "/",
                                         rail_members, position, name));
      rail_link =
          RailLink::connect(sub_rendezvous(rendezvous, "rail_link/" + std::to_string(l) + "/",
                                           rail_members, position, name + "'s link"),
                            name + "'s link");
    }
  }
  // A rail's link only where every rail has one, by every member's agreement: a collective's
  // steps inside the hosts are cut by the rails' (a rail on Gloo runs an all_reduce in other
  // pieces than one on its link), and a large gather or scatter spans every rail.
  if (shares_a_host) {
    const auto linked = store_all_gather(
        sub_rendezvous(rendezvous, "rails_linked/", everyone, me, "every member"), "linked",
        {static_cast<uint8_t>(!on_a_rail || rail_link != nullptr)}, /*max_bytes=*/1);
    const bool every_rail_linked = std::all_of(
        linked.begin(), linked.end(), [](const auto& v) { return v == std::vector<uint8_t>{1}; });
    if (!every_rail_linked) {
      rail_link.reset();
    }
  }
  auto flat = across_hosts(sub_rendezvous(rendezvous, "flat/", everyone, me, "every member"));
  // A failure's roll call, in the chunk's store (its sub-communicators have prefixes of their own).
  auto roll_call =
      std::make_shared<FailureRollCall>(rendezvous, members_elsewhere(placement, rendezvous));
  if (!shares_a_host) {
    // One member per host (member m on host m): the hosts' own link where every member has an
    // address its peers reach, else Gloo alone; either names the members that are gone.
    auto link = RailLink::connect(
        sub_rendezvous(rendezvous, "rail_link/0/", everyone, me, "the hosts' link"),
        "the hosts' link");
    if (link) {
      return make_linked_hosts(me, std::move(flat), std::move(link), std::move(roll_call));
    }
    return reporting_missing_members(std::move(flat), std::move(roll_call));
  }
  return make_host_and_rail_communicator(me, rendezvous.members, std::move(placement),
                                         std::move(host), std::move(rail), std::move(flat),
                                         std::move(rail_link), std::move(roll_call));
}

}  // namespace c10d_func
