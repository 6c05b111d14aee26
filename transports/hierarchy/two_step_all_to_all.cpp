// See two_step_all_to_all.h.
#include "transports/hierarchy/two_step_all_to_all.h"

#include "transports/call_scope.h"
#include "transports/hierarchy/steps_in_order.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace c10d_func {
namespace {

// Up to this many bytes of input per member (on average, crossing between hosts:
// most_crossing_in_two_steps), an all_to_all on even hosts goes in two steps (inside the host, then
// along the rail over its link); above it, on flat Gloo, where the steps, one after the other and
// with reordering copies of the whole buffer, cost more than Gloo's concurrent pairs. Measured on 2
// hosts x 2 ranks over 10 Gb/s, back to back, two steps against flat Gloo: 64 B 0.39-0.47
// against 1.2-2.1 ms, 64 KiB 0.46-0.55 against 1.7 ms, 1 MiB 1.8-2.5 against 2.0-2.4 ms, 8 MiB 13.4
// against 7.6-9.4 ms; again on 2026-12-07, after the rails' links learnt parts of any size: 4
// MiB 10.3 against 7.8, 8 MiB 20.3 against 12.8 ms (4 copies of the whole buffer on 2 cores for 4
// ranks).
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

// The bytes a host's crossing may reach for the two steps: kTwoStepAllToAllBytes per member on
// average. With equal blocks of `b` bytes per member, each member sends and expects
// b (hosts - 1) / hosts of them across, so a host's crossing is 2 per_host b (hosts - 1) / hosts.
int64_t most_crossing_in_two_steps(int64_t hosts, int64_t per_host) {
  return 2 * per_host * kTwoStepAllToAllBytes * (hosts - 1) / hosts;
}

// Between hosts, over this member's rail, before a call goes to flat Gloo: the sizes every
// member of this host sends to and expects from every member of the other hosts, so that every
// member of two hosts checks every pair between them and all fail together (a c10::ValueError
// naming the first that does not pair up), where Gloo would wait for its peers until the
// timeout or abort the process. Between more than two hosts, a host whose own pairs match hears
// of the others' in one more small exchange. `in_exchange`: set while an exchange on the link is
// under way. Sends 2 per_host^2 * 8 bytes to each other host.
void compare_between_hosts(const HostAllToAll& host, const HostPlacement& placement, int64_t rank,
                           const std::vector<int64_t>& ranks, int64_t per_host, RailLink& link,
                           bool& in_exchange) {
  const auto hosts = static_cast<int64_t>(placement.hosts.size());
  const int64_t here = placement.host_of[rank];
  const int64_t values = 2 * per_host * per_host;
  std::vector<at::Tensor> to_hosts(hosts), from_hosts(hosts);
  for (int64_t h = 0; h < hosts; ++h) {
    if (h == here) {
      continue;
    }
    to_hosts[h] = at::empty({values}, at::kLong);
    from_hosts[h] = at::empty({values}, at::kLong);
    int64_t* const out = to_hosts[h].data_ptr<int64_t>();
    for (int64_t l = 0; l < per_host; ++l) {
      for (int64_t m = 0; m < per_host; ++m) {
        const int64_t theirs = placement.hosts[h][m];
        out[l * per_host + m] = host.sends[l][theirs];
        out[per_host * per_host + l * per_host + m] = host.receives[l][theirs];
      }
    }
  }
  {
    StepDetail sizes(kAllToAllSizesDetail);  // a host in the steps fails on this one's header
    in_exchange = true;
    link.all_to_all(to_hosts, from_hosts);
    in_exchange = false;
  }
  const auto member = [&](int64_t index) { return "rank " + std::to_string(ranks.at(index)); };
  const auto unpaired = [&](int64_t from, int64_t to, int64_t sends, int64_t expects) {
    return "all_to_all: " + member(from) + " sends " + member(to) + " " + std::to_string(sends) +
           " bytes, and it expects " + std::to_string(expects) +
           ": split sizes that do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)";
  };
  std::optional<std::string> found;  // the first pair that does not match
  for (int64_t h = 0; h < hosts && !found; ++h) {
    if (h == here) {
      continue;
    }
    // Their member l (of host h) and this host's member m; every value is compared with one this
    // host shared, so none is used as it came.
    const int64_t* const in = from_hosts[h].data_ptr<int64_t>();
    for (int64_t l = 0; l < per_host && !found; ++l) {
      for (int64_t m = 0; m < per_host && !found; ++m) {
        const int64_t theirs = placement.hosts[h][l];
        const int64_t ours = placement.hosts[here][m];
        const int64_t sends = in[l * per_host + m];
        const int64_t expects = in[per_host * per_host + l * per_host + m];
        if (sends != host.receives[m][theirs]) {
          found = unpaired(theirs, ours, sends, host.receives[m][theirs]);
        } else if (expects != host.sends[m][theirs]) {
          found = unpaired(ours, theirs, host.sends[m][theirs], expects);
        }
      }
    }
  }
  // Between two hosts both found the same pairs.
  bool anywhere = found.has_value();
  if (hosts > 2) {
    const at::Tensor flag = at::full({1}, static_cast<int64_t>(anywhere), at::kLong);
    StepDetail sizes(kAllToAllSizesDetail);
    in_exchange = true;
    link.all_reduce(flag, ReduceOp::kMax);
    in_exchange = false;
    anywhere = flag.item<int64_t>() != 0;
  }
  TORCH_CHECK_VALUE(!found, *found);
  TORCH_CHECK_VALUE(!anywhere,
                    "all_to_all: members on other hosts send or expect sizes that do not pair up "
                    "(their errors name them; C10D_FUNC_DEBUG=DETAIL names the ranks)");
}

// The two steps: this member's parts from `sends` into the members' `receives` (parts_of;
// `host` from share_in_host). Sets `in_exchange` once the step between hosts begins.
void all_to_all_in_two_steps(const std::vector<at::Tensor>& sends,
                             const std::vector<at::Tensor>& receives, const HostAllToAll& host,
                             const HostPlacement& placement, int64_t rank, Communicator& local,
                             RailLink& link, bool& in_exchange) {
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
  // buffer. Each way, the payload is several members' parts back to back, whose sizes the
  // headers compare too (layouts).
  PartLayouts layouts{std::vector<uint64_t>(hosts, 0), std::vector<uint64_t>(hosts, 0)};
  std::vector<bool> in_place(hosts, false);
  for (int64_t h = 0; h < hosts; ++h) {
    if (h == here) {
      continue;
    }
    std::vector<int64_t> sent(per_host), expected(per_host);
    for (int64_t l = 0; l < per_host; ++l) {
      sent[l] = host.sends[l][member_at(h, me)];
      expected[l] = receives[member_at(h, l)].numel();
    }
    layouts.sends[h] = PartLayouts::of(sent);
    layouts.receives[h] = PartLayouts::of(expected);
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
  StepDetail step(kAllToAllStepDetail);  // a host that went to flat Gloo fails on this header
  in_exchange = true;
  link.all_to_all(to_hosts, from_hosts, layouts);
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
  const auto hosts = static_cast<int64_t>(placement.hosts.size());
  const int64_t per_host = local.size();
  // A failure outside an exchange on the link (the host's sizes, the step inside the host) is
  // told to the other hosts' members at their next exchange of this collective, where they would
  // otherwise wait for this member until their timeout; one in an exchange, they saw there.
  bool in_exchange = false;
  try {
    const HostAllToAll host = share_in_host(sends, receives, placement, rank, ranks, local);
    // Between two hosts, each host's crossing is the other's when the split sizes pair up, so a
    // host at most at the bound goes to the steps at once (they compare each rail's parts); one
    // above it first compares every pair with the other host (the other host, if it went to the
    // steps, fails on that exchange, and this one on its). Between more, the rails first agree
    // on the largest crossing (one small exchange, all with the same values), and all compare
    // or none.
    const int64_t bound = most_crossing_in_two_steps(hosts, per_host);
    int64_t crossing = host.crossing;
    if (hosts > 2) {
      const at::Tensor largest = at::full({1}, crossing, at::kLong);
      in_exchange = true;
      link.all_reduce(largest, ReduceOp::kMax);
      in_exchange = false;
      crossing = largest.item<int64_t>();
    }
    if (crossing > bound) {
      compare_between_hosts(host, placement, rank, ranks, per_host, link, in_exchange);
    } else {
      all_to_all_in_two_steps(sends, receives, host, placement, rank, local, link, in_exchange);
      return;
    }
  } catch (...) {
    if (!in_exchange) {
      link.refuse();
    }
    throw;
  }
  wait_for(flat.all_to_all(output, input, output_split_sizes, input_split_sizes));
}

}  // namespace c10d_func
