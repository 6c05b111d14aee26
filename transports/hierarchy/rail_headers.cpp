// What starts every message on a rail's link (RailHeader): compared with the member's own before
// a byte of payload is used, and shown to the peers before this member fails.
#include "transports/hierarchy/rail_link.h"

#include <c10/util/Exception.h>

#include <sys/socket.h>

#include <string>
#include <vector>

namespace c10d_func {
namespace {

// The detail of a refusal (RailLink::refuse), which no step names (a StepDetail is a 64-bit hash).
constexpr uint64_t kRefusedDetail = ~uint64_t{0};

// Sends the rest of `header` to every peer that has not had it, as far as its socket takes it
// now: a member failing a collective on one peer's header still shows its own to the others,
// which may agree with this one and would otherwise wait for its payload until the timeout.
void show_header_before_failing(const std::vector<int>& sockets, int64_t self,
                                const std::vector<RailHeader>& headers, std::vector<size_t>& sent,
                                const std::vector<size_t>& sending) {
  for (size_t q = 0; q < sockets.size(); ++q) {
    if (static_cast<int64_t>(q) != self && sent[q] < sizeof(RailHeader) && sending[q] > 0) {
      const ssize_t moved = ::send(sockets[q], reinterpret_cast<const char*>(&headers[q]) + sent[q],
                                   sizeof(RailHeader) - sent[q], MSG_NOSIGNAL | MSG_DONTWAIT);
      sent[q] += moved > 0 ? static_cast<size_t>(moved) : 0;
    }
  }
}

}  // namespace

void RailLink::refuse() {
  const RailHeader header{++collectives_, 0, kRefusedDetail, 0};
  std::vector<RailHeader> headers(sockets_.size(), header);
  std::vector<size_t> sent(sockets_.size(), 0);
  show_header_before_failing(sockets_, position_, headers, sent,
                             std::vector<size_t>(sockets_.size(), sizeof(RailHeader)));
}

void RailLink::check_header(const RailHeader& theirs, const std::vector<RailHeader>& headers,
                            int64_t p, std::vector<size_t>& sent,
                            const std::vector<size_t>& sending, bool parts) const {
  const RailHeader& mine = headers[p];
  const auto name = [&](int64_t q) { return "rank " + std::to_string(members_[q]); };
  if (theirs.collective != mine.collective || theirs.bytes != mine.receives ||
      theirs.receives != mine.bytes || theirs.detail != mine.detail ||
      theirs.layout != mine.expected_layout || theirs.expected_layout != mine.layout) {
    // Shown first, so that the peers this member has not reached fail on the spot too.
    show_header_before_failing(sockets_, position_, headers, sent, sending);
  }
  TORCH_CHECK_VALUE(
      theirs.detail != kRefusedDetail, "between hosts (", name_, "): ", name(p),
      " failed this collective before its step between hosts (its own error says why)");
  TORCH_CHECK(theirs.collective == mine.collective && (parts || theirs.bytes == mine.bytes),
              "between hosts (", name_, "): ", name(p), " is in collective #", theirs.collective,
              " of ", theirs.bytes, " bytes, ", name(position_), " in #", mine.collective, " of ",
              mine.bytes,
              " bytes: the hosts called collectives in another order or with other "
              "sizes");
  const auto is_all_to_all = [](uint64_t detail) {
    return detail == kAllToAllStepDetail || detail == kAllToAllSizesDetail;
  };
  TORCH_CHECK_VALUE(
      theirs.detail == mine.detail || !is_all_to_all(theirs.detail) || !is_all_to_all(mine.detail),
      "between hosts (", name_, "): ", name(p), "'s host took this all_to_all ",
      theirs.detail == kAllToAllStepDetail ? "in steps between hosts" : "to flat Gloo", " and ",
      name(position_), "'s ",
      mine.detail == kAllToAllStepDetail ? "in steps between hosts" : "to flat Gloo",
      ": their members' split sizes do not add up to the same bytes crossing between them, so "
      "split sizes do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)");
  TORCH_CHECK(theirs.detail == mine.detail, "between hosts (", name_, "): ", name(p), " and ",
              name(position_), " are in different collectives (",
              "another op, or a reduce, gather or scatter with another root)");
  // An all_to_all's parts: what each side sends must be what the other expects, both ways, so
  // that both fail here (the side whose expectation holds would wait for the payload).
  const auto unpaired = [&](int64_t from, uint64_t sends, int64_t to, uint64_t expects) {
    return "the members on " + name(from) + "'s host send " + name(to) + " " +
           std::to_string(sends) + " bytes of this all_to_all, and it expects " +
           std::to_string(expects);
  };
  TORCH_CHECK_VALUE(theirs.bytes == mine.receives, "between hosts (", name_,
                    "): ", unpaired(p, theirs.bytes, position_, mine.receives),
                    ": split sizes that do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)");
  TORCH_CHECK_VALUE(theirs.receives == mine.bytes, "between hosts (", name_,
                    "): ", unpaired(position_, mine.bytes, p, theirs.receives),
                    ": split sizes that do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)");
  // The same totals, split into the host's members' parts otherwise.
  const auto reordered = [&](int64_t from, int64_t to, uint64_t bytes) {
    return "the members on " + name(from) + "'s host send " + name(to) + " the " +
           std::to_string(bytes) +
           " bytes of this all_to_all it expects from them, but in parts of other sizes than it "
           "expects from each";
  };
  TORCH_CHECK_VALUE(theirs.layout == mine.expected_layout, "between hosts (", name_,
                    "): ", reordered(p, position_, theirs.bytes),
                    ": split sizes that do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)");
  TORCH_CHECK_VALUE(theirs.expected_layout == mine.layout, "between hosts (", name_,
                    "): ", reordered(position_, p, mine.bytes),
                    ": split sizes that do not pair up (C10D_FUNC_DEBUG=DETAIL names the ranks)");
}

uint64_t PartLayouts::of(const std::vector<int64_t>& sizes) {
  // splitmix64's finalizer over the sizes in order, with the count: a different size anywhere,
  // or the same sizes in another order, gives another digest (short of a 2^-64 collision).
  const auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  uint64_t digest = mix(sizes.size() + 0x9e3779b97f4a7c15ULL);
  for (const int64_t size : sizes) {
    digest = mix(digest ^ (static_cast<uint64_t>(size) + 0x9e3779b97f4a7c15ULL));
  }
  return digest;
}

}  // namespace c10d_func
