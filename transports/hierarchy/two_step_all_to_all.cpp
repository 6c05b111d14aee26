// See two_step_all_to_all.h.
#include "transports/hierarchy/two_step_all_to_all.h"

#include "transports/hierarchy/steps_in_order.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <numeric>
#include <string>
#include <vector>

namespace c10d_func {
namespace {

// Up to this many bytes of input per member (on average, crossing between hosts: in_two_steps),
// an all_to_all on even hosts goes in two steps (inside the host, then along the rail over its
// link); above it, on flat Gloo, where the steps, one after the other and with reordering copies
// of the whole buffer, cost more than Gloo's concurrent pairs. Measured on 2 hosts x 2 ranks
// over 10 Gb/s, back to back, two steps against flat Gloo: 64 B 0.39-0.47 against 1.2-2.1 ms,
// 64 KiB 0.46-0.55 against 1.7 ms, 1 MiB 1.8-2.5 against 2.0-2.4 ms, 8 MiB 13.4 against 7.6-9.4
// ms; again on 2026-12-07, after the rails' links learnt parts of any size: 4 MiB 10.3 against
// 7.8, 8 MiB 20.3 against 12.8 ms (4 copies of the whole buffer on 2 cores for 4 ranks).
constexpr int64_t kTwoStepAllToAllBytes = int64_t{512} << 10;

// No part is larger (1 TiB): sums over a host's members' parts stay far from overflowing.
constexpr int64_t kMostPartBytes = int64_t{1} << 40;

int64_t sum(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

// The bytes every member of this host sends each member of the chunk and expects from it.
struct HostAllToAll {
  std::vector<std::vector<int64_t>> sends;     // [local index][member]
  std::vector<std::vector<int64_t>> receives;  // [local index][member]
  int64_t crossing = 0;  // what the host's members send to and expect from other hosts
};

}  // namespace

std::vector<at::Tensor> parts_of(const at::Tensor& tensor, const std::vector<int64_t>& row_splits) {
  const int64_t row_bytes =
      (tensor.dim() < 2 ? int64_t{1} : c10::multiply_integers(tensor.sizes().slice(1))) *
      static_cast<int64_t>(tensor.element_size());
  const at::Tensor bytes = tensor.view(-1).view(at::kByte);
  std::vector<at::Tensor> parts;
  parts.reserve(row_splits.size());
  int64_t offset = 0;
  for (const int64_t rows : row_splits) {
    TORCH_CHECK(rows >= 0 && offset + rows * row_bytes <= bytes.numel(),
                "all_to_all: split sizes beyond the tensor's ", tensor.sizes(), " rows");
    parts.push_back(bytes.narrow(0, offset, rows * row_bytes));
    offset += rows * row_bytes;
  }
  TORCH_CHECK(offset == bytes.numel(), "all_to_all: split sizes that do not cover the tensor's ",
              tensor.sizes(), " rows");
  return parts;
}

namespace {

// Shares `sends` and `receives` (this member's parts, parts_of) among the host's members, in one
// collective of `local`. The values come from the host's other processes: each is bounded, and
// what every two members of the host send each other must be what the other expects (raises a
// ValueError naming the pair otherwise, on every member of the host).
HostAllToAll share_in_host(const std::vector<at::Tensor>& sends,
                           const std::vector<at::Tensor>& receives, const HostPlacement& placement,
                           int64_t rank, const std::vector<int64_t>& ranks, Communicator& local) {
  const auto member = [&](int64_t index) { return "rank " + std::to_string(ranks.at(index)); };
  const auto n = static_cast<int64_t>(sends.size());
  const int64_t per_host = local.size();
  at::Tensor mine = at::empty({2 * n}, at::kLong);
  int64_t* const own = mine.data_ptr<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    own[j] = static_cast<int64_t>(sends[j].nbytes());
    own[n + j] = static_cast<int64_t>(receives[j].nbytes());
  }
  // Gathered into private memory: each value is read once, below, and used as checked.
  const at::Tensor shared = at::empty({per_host, 2 * n}, at::kLong);
  wait_for(local.all_gather(shared, mine));
  const int64_t* const values = shared.data_ptr<int64_t>();
  const int64_t here = placement.host_of[rank];
  HostAllToAll host;
  host.sends.assign(per_host, std::vector<int64_t>(n));
  host.receives.assign(per_host, std::vector<int64_t>(n));
  for (int64_t l = 0; l < per_host; ++l) {
    const int64_t peer = placement.hosts[here][l];
    // This member's own row as it wrote it, not as it came back.
    const int64_t* const row = peer == rank ? own : values + l * 2 * n;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t sent = row[j];
      const int64_t expected = row[n + j];
      TORCH_CHECK(
          sent >= 0 && sent <= kMostPartBytes && expected >= 0 && expected <= kMostPartBytes,
          "all_to_all: ", member(peer), " of this host shared part sizes out of bounds (", sent,
          " and ", expected, " bytes for ", member(j),
          "): that process wrote its shared memory wrongly");
      host.sends[l][j] = sent;
      host.receives[l][j] = expected;
      if (placement.host_of[j] != here) {
        host.crossing += sent + expected;
      }
    }
  }
  // What every two members of the host (each with itself too) send each other must be what the
  // other expects: every member checks every pair, so the whole host fails together, where a
  // member outside a bad pair would go on to steps its host no longer takes.
  for (int64_t a = 0; a < per_host; ++a) {
    for (int64_t b = 0; b < per_host; ++b) {
      const int64_t from = placement.hosts[here][a];
      const int64_t to = placement.hosts[here][b];
      TORCH_CHECK_VALUE(
          host.sends[a][to] == host.receives[b][from], "all_to_all: ", member(from), " sends ",
          member(to), " ", host.sends[a][to], " bytes, and it expects ", host.receives[b][from],
          ": split sizes that do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)");
    }
  }
  return host;
}

// Whether an all_to_all whose host shared `host` goes in two steps: up to kTwoStepAllToAllBytes
// per member on average, crossing between hosts. Between two hosts, what one host's members send
// to and expect from the other is what the other's expect and send: both reach the same answer
// from their own host's sizes. Between more, the rails take the largest host's (one small
// exchange on each rail, all with the same values).
bool in_two_steps(const HostAllToAll& host, const HostPlacement& placement, int64_t per_host,
                  RailLink& link) {
  const auto hosts = static_cast<int64_t>(placement.hosts.size());
  int64_t crossing = host.crossing;
  if (hosts > 2) {
    const at::Tensor largest = at::full({1}, crossing, at::kLong);
    link.all_reduce(largest, ReduceOp::kMax);
    crossing = largest.item<int64_t>();
  }
  // Equal blocks of `b` bytes per member: each member sends and expects b (hosts - 1) / hosts of
  // them across, so a host's crossing is 2 per_host b (hosts - 1) / hosts.
  return crossing <= 2 * per_host * kTwoStepAllToAllBytes * (hosts - 1) / hosts;
}

// The two steps: this member's parts from `sends` into the members' `receives` (parts_of;
// `host` from share_in_host).
void all_to_all_in_two_steps(const std::vector<at::Tensor>& sends,
                             const std::vector<at::Tensor>& receives, const HostAllToAll& host,
                             const HostPlacement& placement, int64_t rank, Communicator& local,
                             RailLink& link) {
  const auto hosts = static_cast<int64_t>(placement.hosts.size());
  const int64_t per_host = local.size();
  const int64_t here = placement.host_of[rank];
  const int64_t me = placement.local_index[rank];
  const auto member_at = [&](int64_t h, int64_t l) { return placement.hosts[h][l]; };
  const auto bytes = at::TensorOptions().dtype(at::kByte);
  // Inside the host: local member l gets, from each member of this host, its parts for the
  // members of local index l on every host, in host order.
  // What host h's member of this local index gets from this one along the rail: every local
  // member's part for it.
  std::vector<int64_t> to_local(per_host, 0), from_local(per_host, 0), to_host(hosts, 0);
  for (int64_t l = 0; l < per_host; ++l) {
    for (int64_t h = 0; h < hosts; ++h) {
      to_local[l] += sends[member_at(h, l)].numel();
      from_local[l] += host.sends[l][member_at(h, me)];
      to_host[h] += host.sends[l][member_at(h, me)];
    }
  }
  const at::Tensor by_local = local.new_output({sum(to_local)}, bytes);
  int64_t offset = 0;
  for (int64_t l = 0; l < per_host; ++l) {
    for (int64_t h = 0; h < hosts; ++h) {
      const at::Tensor& part = sends[member_at(h, l)];
      by_local.narrow(0, offset, part.numel()).copy_(part);
      offset += part.numel();
    }
  }
  const at::Tensor from_host_members = local.new_output({sum(from_local)}, bytes);
  wait_for(local.all_to_all(from_host_members, by_local, from_local, to_local));
  // Along this member's rail: to host h, every local member's part for its member of this local
  // index, in local order; the parts for this member go straight to their places.
  std::vector<at::Tensor> to_hosts(hosts), from_hosts(hosts);
  std::vector<int64_t> filled(hosts, 0);
  for (int64_t h = 0; h < hosts; ++h) {
    if (h != here) {
      to_hosts[h] = at::empty({to_host[h]}, bytes);
    }
  }
  offset = 0;
  for (int64_t l = 0; l < per_host; ++l) {
    for (int64_t h = 0; h < hosts; ++h) {
      const int64_t length = host.sends[l][member_at(h, me)];
      const at::Tensor piece = from_host_members.narrow(0, offset, length);
      offset += length;
      if (h == here) {
        receives[member_at(here, l)].copy_(piece);  // sizes paired in share_in_host
      } else {
        to_hosts[h].narrow(0, filled[h], length).copy_(piece);
        filled[h] += length;
      }
    }
  }
  // From host h, its members' parts for this member in local order: straight into the output
  // where their places follow one another there (members numbered host by host), else through a
  // buffer.
  std::vector<bool> in_place(hosts, false);
  for (int64_t h = 0; h < hosts; ++h) {
    if (h == here) {
      continue;
    }
    int64_t total = 0;
    bool adjacent = true;
    for (int64_t l = 0; l < per_host; ++l) {
      const at::Tensor& part = receives[member_at(h, l)];
      adjacent = adjacent &&
                 (l == 0 || static_cast<const char*>(part.data_ptr()) ==
                                static_cast<const char*>(receives[member_at(h, l - 1)].data_ptr()) +
                                    receives[member_at(h, l - 1)].numel());
      total += part.numel();
    }
    in_place[h] = adjacent;
    from_hosts[h] =
        adjacent ? receives[member_at(h, 0)].as_strided({total}, {1}) : at::empty({total}, bytes);
  }
  link.all_to_all(to_hosts, from_hosts);
  for (int64_t h = 0; h < hosts; ++h) {
    if (h == here || in_place[h]) {
      continue;
    }
    offset = 0;
    for (int64_t l = 0; l < per_host; ++l) {
      const at::Tensor& part = receives[member_at(h, l)];
      part.copy_(from_hosts[h].narrow(0, offset, part.numel()));
      offset += part.numel();
    }
  }
}

}  // namespace

void all_to_all_across_hosts(const at::Tensor& output, const at::Tensor& input,
                             const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes,
                             const HostPlacement& placement, int64_t rank,
                             const std::vector<int64_t>& ranks, Communicator& local, RailLink& link,
                             Communicator& flat) {
  const std::vector<at::Tensor> sends = parts_of(input, input_split_sizes);
  const std::vector<at::Tensor> receives = parts_of(output, output_split_sizes);
  HostAllToAll host;
  try {
    host = share_in_host(sends, receives, placement, rank, ranks, local);
  } catch (...) {
    link.refuse();  // the other hosts' members fail at once, not at their timeout
    throw;
  }
  if (in_two_steps(host, placement, local.size(), link)) {
    all_to_all_in_two_steps(sends, receives, host, placement, rank, local, link);
  } else {
    wait_for(flat.all_to_all(output, input, output_split_sizes, input_split_sizes));
  }
}

}  // namespace c10d_func
