// See rail_link.h.
#include "transports/hierarchy/rail_link.h"

#include "transports/call_scope.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "transports/byte_reduce.h"
#include "transports/hierarchy/rail_sockets.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <functional>
#include <sstream>

namespace c10d_func {
namespace {

using Clock = std::chrono::steady_clock;
using namespace rail;  // the sockets (rail_sockets.h) and the handshake (rail_handshake.h)

char* data_of(const at::Tensor& tensor) {
  return static_cast<char*>(tensor.data_ptr());
}

// In place, reductions between two hosts are folded as the bytes arrive, in steps of this many
// bytes: large enough that a step's kernel call costs nothing beside it, small enough that the
// reduction runs while the rest is still on the wire.
constexpr size_t kReduceStep = size_t{256} << 10;
// The most one exchange carries: a larger all_reduce between two hosts goes in windows of this
// size, so the inbox kept across collectives stays this small whatever the message.
constexpr size_t kWindowBytes = size_t{8} << 20;

}  // namespace

void RailLink::fold_from_peer(const at::Tensor& window, const at::Tensor& into, ReduceOp op,
                              BegunExchange* begun) {
  const size_t bytes = static_cast<size_t>(window.numel()) * window.element_size();
  const size_t element = window.element_size();
  char* const mine = static_cast<char*>(into.data_ptr());
  const int64_t peer = 1 - position_;
  size_t folded = 0;
  const auto fold = [&](size_t ready) {
    ready -= ready % element;
    if (ready > folded && (ready - folded >= kReduceStep || ready == bytes)) {
      const char* theirs = inbox_[peer].data() + folded;
      reduce_into(mine + folded, {mine + folded, theirs},
                  static_cast<int64_t>((ready - folded) / element), window.scalar_type(), op);
      folded = ready;
    }
  };
  if (begun == nullptr) {
    exchange(data_of(window), window.nbytes(), fold);
    return;
  }
  // What went out is the begun copy; `into` is still what it was when begun.
  exchange(data_of(window), window.nbytes(), fold, {}, {},
           std::vector<char*>(2, begun->payload.data()), begun);
}

bool BegunExchange::all_sent() const {
  const size_t total = sizeof(RailHeader) + payload.size();
  return std::all_of(sent.begin(), sent.end(), [&](size_t gone) { return gone == total; });
}

RailLink::RailLink(const Rendezvous& rendezvous, std::string name, std::vector<int> sockets)
    : position_(rendezvous.rank),
      members_(rendezvous.members),
      name_(std::move(name)),
      sockets_(std::move(sockets)),
      timeout_(rendezvous.timeout),
      inbox_(sockets_.size()) {}

RailLink::~RailLink() {
  for (const int fd : sockets_) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
}

void RailLink::all_reduce(const at::Tensor& buffer, ReduceOp op) {
  if (size() == 2) {
    // One peer: fold its bytes into the buffer as they come, once they have also been sent, a
    // window at a time (the inbox never holds more than a window).
    reduce_with_peer(buffer, buffer, op);
    return;
  }
  // Between more than two hosts the hierarchy sends small messages only (kRailLinkBytes).
  TORCH_INTERNAL_ASSERT(buffer.nbytes() <= kWindowBytes, "rail link: ", buffer.nbytes(),
                        " bytes between ", size(), " hosts");
  exchange(data_of(buffer), buffer.nbytes(), [](size_t) {});
  reduce_in_host_order(buffer, op);
}

void RailLink::reduce_in_host_order(const at::Tensor& buffer, ReduceOp op) {
  // Every member reduces the same buffers in the same (host) order, into a fresh tensor.
  std::vector<const char*> sources(sockets_.size());
  for (size_t p = 0; p < sources.size(); ++p) {
    sources[p] = static_cast<int64_t>(p) == position_ ? static_cast<const char*>(buffer.data_ptr())
                                                      : inbox_[p].data();
  }
  at::Tensor result = at::empty_like(buffer);
  reduce_into(result.data_ptr(), std::move(sources), buffer.numel(), buffer.scalar_type(), op);
  buffer.copy_(result);
}

std::shared_ptr<BegunExchange> RailLink::begin_all_reduce(const at::Tensor& buffer) {
  const size_t bytes = buffer.nbytes();
  TORCH_INTERNAL_ASSERT(buffer.is_contiguous() && bytes <= static_cast<size_t>(kBegunBytes),
                        "rail link: an all_reduce of ", bytes, " bytes begun in the call");
  auto begun = std::make_shared<BegunExchange>();
  begun->collective = ++collectives_;
  begun->detail = StepDetail::current();
  const char* const mine = static_cast<const char*>(buffer.data_ptr());
  begun->payload.assign(mine, mine + bytes);
  RailHeader header{begun->collective, bytes, begun->detail, bytes};
  const size_t total = sizeof(RailHeader) + bytes;
  begun->sent.assign(sockets_.size(), 0);
  begun->sent[position_] = total;
  for (int64_t p = 0; p < size(); ++p) {
    if (p == position_) {
      continue;
    }
    iovec parts[2] = {{&header, sizeof(RailHeader)}, {begun->payload.data(), bytes}};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = bytes > 0 ? 2 : 1;
    const ssize_t moved = ::sendmsg(sockets_[p], &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    TORCH_CHECK(moved >= 0 || errno == EAGAIN || errno == EINTR, "between hosts (", name_,
                "): sending to rank ", members_[p], " failed (", error_text(errno),
                "): it exited or its host is unreachable");
    begun->sent[p] = moved > 0 ? static_cast<size_t>(moved) : 0;
  }
  return begun;
}

void RailLink::finish_all_reduce(BegunExchange& begun, const at::Tensor& buffer, ReduceOp op) {
  if (size() == 2) {
    fold_from_peer(buffer, buffer, op, &begun);
    return;
  }
  exchange(
      data_of(buffer), buffer.nbytes(), [](size_t) {}, {}, {},
      std::vector<char*>(sockets_.size(), begun.payload.data()), &begun);
  reduce_in_host_order(buffer, op);
}

void RailLink::reduce_with_peer(const at::Tensor& send, const at::Tensor& into, ReduceOp op) {
  TORCH_INTERNAL_ASSERT(size() == 2 && send.numel() == into.numel() &&
                            send.scalar_type() == into.scalar_type() && send.is_contiguous() &&
                            into.is_contiguous(),
                        "rail link: reduce_with_peer between ", size(), " hosts");
  const int64_t per_window = std::max<int64_t>(kWindowBytes / send.element_size(), 1);
  const at::Tensor from = send.view(-1);
  const at::Tensor to = into.view(-1);
  for (int64_t start = 0; start < from.numel(); start += per_window) {
    const int64_t length = std::min(per_window, from.numel() - start);
    fold_from_peer(from.narrow(0, start, length), to.narrow(0, start, length), op);
  }
}

void RailLink::all_gather(const at::Tensor& block, const at::Tensor& blocks) {
  TORCH_INTERNAL_ASSERT(block.is_contiguous() && blocks.is_contiguous() && blocks.dim() == 2 &&
                            blocks.size(0) == size() && blocks.size(1) == block.numel() &&
                            blocks.scalar_type() == block.scalar_type(),
                        "rail link: all_gather of ", block.sizes(), " into ", blocks.sizes());
  std::vector<char*> rows(sockets_.size());
  for (int64_t p = 0; p < size(); ++p) {
    rows[p] = static_cast<char*>(blocks[p].data_ptr());
  }
  // The own row is a copy, unless the caller's block already is that row.
  if (rows[position_] != block.data_ptr()) {
    blocks[position_].copy_(block.view(-1));
  }
  exchange(
      data_of(block), block.nbytes(), [](size_t) {}, rows);
}

void RailLink::broadcast(const at::Tensor& buffer, int64_t root) {
  TORCH_INTERNAL_ASSERT(buffer.is_contiguous() && root >= 0 && root < size(),
                        "rail link: broadcast from position ", root, " of ", size());
  std::vector<char*> into(sockets_.size(), nullptr);
  into[root] = data_of(buffer);
  exchange(
      data_of(buffer), buffer.nbytes(), [](size_t) {}, into, RootedFlow{root});
}

size_t RailLink::root_parts(const char* op, const std::vector<at::Tensor>& parts, int64_t root,
                            std::vector<char*>& addresses) const {
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(parts.size()) == size(), "rail link: ", op, " of ",
                        parts.size(), " parts between ", size());
  const size_t bytes = parts[root == 0 ? 1 : 0].nbytes();
  for (int64_t p = 0; p < size(); ++p) {
    TORCH_INTERNAL_ASSERT(p == root || (parts[p].is_contiguous() && parts[p].nbytes() == bytes),
                          "rail link: ", op, " parts of different sizes or strided");
    addresses[p] = p == root ? nullptr : data_of(parts[p]);
  }
  return bytes;
}

void RailLink::scatter(const std::vector<at::Tensor>& sends, const at::Tensor& receive,
                       int64_t root) {
  TORCH_INTERNAL_ASSERT(root >= 0 && root < size() && size() > 1,
                        "rail link: scatter from position ", root, " of ", size());
  std::vector<char*> from(sockets_.size(), nullptr), into(sockets_.size(), nullptr);
  size_t bytes = 0;
  if (position_ == root) {
    bytes = root_parts("scatter", sends, root, from);
  } else {
    TORCH_INTERNAL_ASSERT(receive.is_contiguous(), "rail link: scatter into a strided tensor");
    bytes = receive.nbytes();
    into[root] = data_of(receive);
  }
  exchange(
      position_ == root ? from[root == 0 ? 1 : 0] : into[root], bytes, [](size_t) {}, into,
      RootedFlow{root}, from);
}

void RailLink::gather(const at::Tensor& send, const std::vector<at::Tensor>& receives,
                      int64_t root) {
  TORCH_INTERNAL_ASSERT(root >= 0 && root < size() && size() > 1, "rail link: gather to position ",
                        root, " of ", size());
  std::vector<char*> into(sockets_.size(), nullptr);
  size_t bytes = 0;
  if (position_ == root) {
    bytes = root_parts("gather", receives, root, into);
  } else {
    TORCH_INTERNAL_ASSERT(send.is_contiguous(), "rail link: gather from a strided tensor");
    bytes = send.nbytes();
  }
  exchange(
      position_ == root ? nullptr : data_of(send), bytes, [](size_t) {}, into,
      RootedFlow{root, /*to_root=*/true});
}

void RailLink::compare_rooted(size_t bytes) {
  TORCH_INTERNAL_ASSERT(StepDetail::current() != 0,
                        "rail link: a rooted step's comparison without a detail to compare");
  exchange(
      nullptr, bytes, [](size_t) {}, {}, RootedFlow{size()});
}

void RailLink::all_to_all(const std::vector<at::Tensor>& sends,
                          const std::vector<at::Tensor>& receives, const PartLayouts& layouts) {
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(sends.size()) == size() &&
                            static_cast<int64_t>(receives.size()) == size(),
                        "rail link: all_to_all of ", sends.size(), " parts between ", size());
  std::vector<char*> from(sockets_.size(), nullptr), into(sockets_.size(), nullptr);
  TORCH_INTERNAL_ASSERT(
      layouts.sends.size() == layouts.receives.size() &&
          (layouts.sends.empty() || static_cast<int64_t>(layouts.sends.size()) == size()),
      "rail link: all_to_all layouts of ", layouts.sends.size(), " parts between ", size());
  PartSizes parts{std::vector<size_t>(sockets_.size(), 0), std::vector<size_t>(sockets_.size(), 0),
                  layouts};
  for (int64_t p = 0; p < size(); ++p) {
    if (p == position_) {
      continue;
    }
    TORCH_INTERNAL_ASSERT(sends[p].is_contiguous() && receives[p].is_contiguous(),
                          "rail link: all_to_all of strided parts");
    from[p] = data_of(sends[p]);
    into[p] = data_of(receives[p]);
    parts.sends[p] = sends[p].nbytes();
    parts.receives[p] = receives[p].nbytes();
  }
  exchange(
      nullptr, 0, [](size_t) {}, into, {}, from, nullptr, &parts);
}

void RailLink::exchange(char* payload, size_t bytes,
                        const std::function<void(size_t)>& received_up_to,
                        const std::vector<char*>& receive_into, RootedFlow rooted,
                        const std::vector<char*>& send_from, BegunExchange* begun,
                        const PartSizes* part_sizes) {
  const int64_t members = size();
  TORCH_INTERNAL_ASSERT(part_sizes == nullptr || (!receive_into.empty() && !send_from.empty() &&
                                                  rooted.root < 0 && begun == nullptr),
                        "rail link: parts of different sizes go from and into given buffers");
  // Per peer: the header it gets (with parts, each its own sizes), how much of (header, payload)
  // goes to it and comes from it, how much has gone and come; their header.
  std::vector<RailHeader> headers(
      members, begun != nullptr ? RailHeader{begun->collective, bytes, begun->detail, bytes}
                                : RailHeader{++collectives_, bytes, StepDetail::current(), bytes});
  std::vector<size_t> sending(members, 0), receiving(members, 0), sent(members, 0), got(members, 0);
  std::vector<RailHeader> theirs(members);
  const size_t total = sizeof(RailHeader) + bytes;
  // A rooted flow carries its payload one way: from the root (broadcast, scatter), which
  // receives nothing while the others send nothing and hear from it alone, or to the root
  // (gather), which sends nothing while the others send to it alone. One with a detail (a
  // scatter or gather, or a broadcast a scatter runs as) shows every member's header to every
  // other, so that members naming other roots fail on the spot, both sides, even two that each
  // think they send (and none receives).
  const bool headers_everywhere = rooted.root >= 0 && headers[0].detail != 0;
  const size_t header_only = headers_everywhere ? sizeof(RailHeader) : 0;
  for (int64_t p = 0; p < members; ++p) {
    if (p == position_) {
      continue;
    }
    const bool sends = rooted.root < 0 || (rooted.to_root ? p : position_) == rooted.root;
    const bool receives = rooted.root < 0 || (rooted.to_root ? position_ : p) == rooted.root;
    sending[p] = sends ? total : header_only;
    receiving[p] = receives ? total : header_only;
    if (part_sizes != nullptr) {
      headers[p].bytes = part_sizes->sends[p];
      headers[p].receives = part_sizes->receives[p];
      if (!part_sizes->layouts.sends.empty()) {
        headers[p].layout = part_sizes->layouts.sends[p];
        headers[p].expected_layout = part_sizes->layouts.receives[p];
      }
      sending[p] = sizeof(RailHeader) + part_sizes->sends[p];
      receiving[p] = sizeof(RailHeader) + part_sizes->receives[p];
    }
    sent[p] = begun != nullptr ? begun->sent[p] : 0;
    if (receives && receive_into.empty() && inbox_[p].size() < bytes) {
      inbox_[p].resize(bytes);
    }
  }
  const auto inbox = [&](int64_t p) {
    return receive_into.empty() ? inbox_[p].data() : receive_into[p];
  };
  const auto name = [&](int64_t p) { return "rank " + std::to_string(members_[p]); };
  // The header's rest, then the payload's rest, as one scatter/gather list.
  const auto pieces = [&](size_t done, size_t all, char* head, char* body, iovec(&out)[2]) {
    int count = 0;
    if (done < sizeof(RailHeader)) {
      out[count++] = {head + done, sizeof(RailHeader) - done};
      done = sizeof(RailHeader);
    }
    if (all > done) {
      out[count++] = {body + (done - sizeof(RailHeader)), all - done};
    }
    return count;
  };
  // Payload both sent to and received from every peer: what may be folded in place.
  const auto settled = [&] {
    size_t least = bytes;
    for (int64_t p = 0; p < members; ++p) {
      if (p != position_) {
        least = std::min({least, sent[p] - std::min(sent[p], sizeof(RailHeader)),
                          got[p] - std::min(got[p], sizeof(RailHeader))});
      }
    }
    return least;
  };
  const std::chrono::milliseconds timeout = timeout_.get();
  const auto deadline = Clock::now() + timeout;
  std::exception_ptr unpaired;  // a peer's sizes that do not match, raised once the rest is done
  std::vector<pollfd> ready;
  std::vector<int64_t> peer_of;
  // Until nothing is left to send or receive: worked out afresh each round from the counts, as
  // a header shown before failing (check_header) or a pair stopped short changes what is left.
  while (true) {
    ready.clear();
    peer_of.clear();
    for (int64_t p = 0; p < members; ++p) {
      if (p == position_) {
        continue;
      }
      const short events = static_cast<short>((sent[p] < sending[p] ? POLLOUT : 0) |
                                              (got[p] < receiving[p] ? POLLIN : 0));
      if (events != 0) {
        ready.push_back({sockets_[p], events, 0});
        peer_of.push_back(p);
      }
    }
    if (ready.empty()) {
      break;
    }
    const int polled = ::poll(ready.data(), ready.size(), milliseconds_until(deadline));
    if (polled < 0 && errno == EINTR) {
      continue;
    }
    if (polled == 0) {
      std::ostringstream who;
      for (size_t i = 0; i < peer_of.size(); ++i) {
        who << (i ? ", " : "") << name(peer_of[i]);
      }
      TORCH_CHECK(false, "between hosts (", name_, "): ", who.str(),
                  " did not take part in the collective within C10D_FUNC_TIMEOUT (",
                  static_cast<double>(timeout.count()) / 1000.0, " s)");
    }
    for (size_t i = 0; i < ready.size(); ++i) {
      const int64_t p = peer_of[i];
      const int fd = sockets_[p];
      if ((ready[i].revents & POLLOUT) != 0) {
        iovec parts[2];
        msghdr message{};
        message.msg_iov = parts;
        message.msg_iovlen = pieces(sent[p], sending[p], reinterpret_cast<char*>(&headers[p]),
                                    send_from.empty() ? payload : send_from[p], parts);
        const ssize_t moved = ::sendmsg(fd, &message, MSG_NOSIGNAL);
        TORCH_CHECK(moved >= 0 || errno == EAGAIN || errno == EINTR, "between hosts (", name_,
                    "): sending to ", name(p), " failed (", error_text(errno),
                    "): it exited or its host is unreachable");
        sent[p] += moved > 0 ? static_cast<size_t>(moved) : 0;
      }
      if ((ready[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && got[p] < receiving[p]) {
        iovec parts[2];
        msghdr message{};
        message.msg_iov = parts;
        message.msg_iovlen =
            pieces(got[p], receiving[p], reinterpret_cast<char*>(&theirs[p]), inbox(p), parts);
        const ssize_t moved = ::recvmsg(fd, &message, 0);
        TORCH_CHECK(moved != 0, "between hosts (", name_, "): ", name(p),
                    " closed the connection (it exited)");
        TORCH_CHECK(moved > 0 || errno == EAGAIN || errno == EINTR, "between hosts (", name_,
                    "): receiving from ", name(p), " failed (", error_text(errno),
                    "): it exited or its host is unreachable");
        if (moved > 0) {
          const size_t before = got[p];
          got[p] += static_cast<size_t>(moved);
          if (before < sizeof(RailHeader) && got[p] >= sizeof(RailHeader)) {
            try {
              check_header(theirs[p], headers, p, sent, sending, part_sizes != nullptr);
            } catch (const c10::ValueError&) {
              // This pair's sizes do not match, or the peer refused: both sides of the pair stop
              // there (each compares both sizes), and the exchange with every other peer goes on,
              // so none of them waits for this member's payload until its timeout. Raised after.
              // This member's header still goes whole, so that the peer fails on it too.
              unpaired = std::current_exception();
              sending[p] = std::min(sending[p], std::max(sent[p], sizeof(RailHeader)));
              receiving[p] = got[p];
            }
          }
        }
      }
    }
    received_up_to(settled());
  }
  if (unpaired) {
    std::rethrow_exception(unpaired);
  }
}

}  // namespace c10d_func
