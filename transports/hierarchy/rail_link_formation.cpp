// RailLink::connect: forming a rail's link (see rail_link.h): every member publishes an address
// in the store, lower positions accept and higher ones connect, each connection proving with a
// hello that it belongs to the job (rail_handshake.h) before it takes a member's slot.
#include "transports/hierarchy/rail_link.h"

#include <c10/util/Exception.h>

#include "transports/hierarchy/rail_handshake.h"
#include "transports/hierarchy/rail_sockets.h"
#include "transports/host_address.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <sstream>
#include <string_view>
#include <thread>

namespace c10d_func {
namespace {

using Clock = std::chrono::steady_clock;
using namespace rail;  // the sockets (rail_sockets.h) and the handshake (rail_handshake.h)

// Each member's address record, through the store (store_all_gather: "rail_link/<position>").
constexpr const char* kAddressKey = "rail_link";

// A connection that has not yet proven it belongs to the job: its hello so far.
struct Candidate {
  int fd = -1;
  std::string from;  // "address:port", for the refusal's message
  rail::Hello hello{};
  size_t got = 0;
};

// Accepts until every higher position has a proven connection in `sockets`: each connection's
// hello is read as its bytes come (one that sends nothing holds no one up), and a connection
// that fails the hello is closed while accepting goes on, so a stranger can neither take a slot
// nor end the formation. At most kMaxCandidates wait at once: the oldest gives way.
void accept_members(int listener, const Rendezvous& rendezvous, uint64_t identity,
                    const rail::Secret& secret, Clock::time_point deadline,
                    std::vector<int>& sockets) {
  constexpr size_t kMaxCandidates = 64;
  const int64_t me = rendezvous.rank;
  int64_t missing = rendezvous.size - 1 - me;
  std::deque<Candidate> candidates;
  size_t refused = 0;
  std::string last_refusal;
  const auto refuse = [&](Candidate& candidate, const std::string& why) {
    ::close(candidate.fd);
    candidate.fd = -1;
    ++refused;
    last_refusal = why + " from " + candidate.from;
  };
  while (missing > 0) {
    std::vector<pollfd> ready{{listener, POLLIN, 0}};
    for (const Candidate& candidate : candidates) {
      ready.push_back({candidate.fd, POLLIN, 0});
    }
    const int polled = ::poll(ready.data(), ready.size(), milliseconds_until(deadline));
    if (polled < 0 && errno == EINTR) {
      continue;
    }
    if (polled <= 0) {
      std::ostringstream why;
      why << "c10d_func: connecting the hosts across a rail: " << missing << " host(s)' members of "
          << rendezvous.group << " did not connect within C10D_FUNC_TIMEOUT";
      if (refused > 0) {
        why << " (" << refused << " connection(s) refused for not proving they belong to the "
            << "job; the last: " << last_refusal << ")";
      }
      TORCH_CHECK(false, why.str());
    }
    for (size_t i = 1; i < ready.size(); ++i) {
      Candidate& candidate = candidates[i - 1];
      if ((ready[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      const ssize_t got = ::recv(candidate.fd, candidate.hello.data() + candidate.got,
                                 rail::kHelloBytes - candidate.got, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        refuse(candidate, "a connection closed before its hello was whole");
        continue;
      }
      if (got < 0 || (candidate.got += static_cast<size_t>(got)) < rail::kHelloBytes) {
        continue;
      }
      const rail::HelloVerdict verdict = rail::check_hello(candidate.hello.data(), candidate.got,
                                                           identity, secret, me, rendezvous.size);
      if (verdict.position < 0) {
        refuse(candidate, verdict.refused);
      } else if (sockets[verdict.position] >= 0) {
        refuse(candidate, "a second hello of position " + std::to_string(verdict.position));
      } else {
        transfer_all(candidate.fd, const_cast<uint8_t*>(rail::kAccepted.data()),
                     rail::kAccepted.size(), /*send=*/true, deadline, "a peer");
        sockets[verdict.position] = candidate.fd;
        candidate.fd = -1;
        --missing;
      }
    }
    std::erase_if(candidates, [](const Candidate& candidate) { return candidate.fd < 0; });
    if ((ready[0].revents & POLLIN) != 0) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      const int fd =
          ::accept4(listener, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC);
      if (fd >= 0) {
        if (candidates.size() == kMaxCandidates) {
          refuse(candidates.front(), "a connection that sent no whole hello in time");
          candidates.pop_front();
        }
        candidates.push_back({fd, remote_of(address), {}, 0});
      }
    }
  }
  for (const Candidate& candidate : candidates) {
    ::close(candidate.fd);
  }
  if (refused > 0) {
    TORCH_WARN(
        "c10d_func: ", rendezvous.group, ": the rail link refused ", refused,
        " connection(s) that did not prove they belong to this job (the last: ", last_refusal, ")");
  }
}

}  // namespace

std::unique_ptr<RailLink> RailLink::connect(const Rendezvous& rendezvous, const std::string& name) {
  const int64_t me = rendezvous.rank;
  const auto deadline = Clock::now() + rendezvous.remaining();
  const auto peer = [&](int64_t position) {
    return "rank " + std::to_string(rendezvous.members.at(position)) + " (" + name + ")";
  };
  // C10D_FUNC_HOST_LINKS=0: this member publishes no address, so its rail (or the hosts' link)
  // is not formed and its steps between hosts run on Gloo.
  const char* links = std::getenv("C10D_FUNC_HOST_LINKS");
  const bool links_off = links != nullptr && std::string_view(links) == "0";
  const std::optional<std::string> address = links_off ? std::nullopt : address_for_peers();
  auto [listener, port] = address ? listen_on(*address) : std::pair<int, int>{-1, 0};
  // A fresh secret per formation, known only through the store (rail_handshake.h).
  const rail::Secret secret = rail::fresh_secret();
  const uint64_t identity = rail::job_identity(rendezvous.group);
  const std::string mine =
      listener < 0 ? std::string(rail::kNoAddress) : rail::address_record(*address, port, secret);
  const auto records = store_all_gather(rendezvous, kAddressKey, {mine.begin(), mine.end()},
                                        /*max_bytes=*/4096);
  std::vector<rail::AddressRecord> where(rendezvous.size);
  bool everyone_listens = true;
  for (int64_t p = 0; p < rendezvous.size; ++p) {
    where[p] = rail::parse_address_record(
        std::string_view(reinterpret_cast<const char*>(records[p].data()), records[p].size()));
    if (!where[p].error.empty()) {
      if (listener >= 0) {
        ::close(listener);
      }
      // Every member reads the same records, so every member fails here alike.
      TORCH_CHECK(false, "c10d_func: connecting the hosts across a rail: ", peer(p),
                  " published a malformed address in the store (", where[p].error,
                  "): another version of c10d_func, or something else wrote the key");
    }
    everyone_listens = everyone_listens && where[p].listens;
  }
  if (!everyone_listens) {
    if (listener >= 0) {
      ::close(listener);
    }
    return nullptr;
  }
  std::vector<int> sockets(rendezvous.size, -1);
  try {
    // Test-only: members connect this much later, so that the listeners are open (and meet a
    // test's strangers) for that long first (tests/python/test_hosts.py).
    if (const char* delay = std::getenv("C10D_FUNC_TEST_RAIL_CONNECT_DELAY_MS"); delay && *delay) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(delay)));
    }
    // Lower positions accept, higher ones connect and prove they belong to the job.
    for (int64_t p = 0; p < me; ++p) {
      sockets[p] = connect_to(where[p].host, where[p].port, deadline, peer(p));
      rail::Hello hello = rail::make_hello(me, identity, where[p].secret);
      transfer_all(sockets[p], hello.data(), hello.size(), /*send=*/true, deadline, peer(p));
      std::array<uint8_t, rail::kAcceptedBytes> answer{};
      transfer_all(sockets[p], answer.data(), answer.size(), /*send=*/false, deadline, peer(p));
      TORCH_CHECK(answer == rail::kAccepted,
                  "c10d_func: connecting the hosts across a rail: ", peer(p),
                  " answered the hello with something else than c10d_func's acceptance");
    }
    accept_members(listener, rendezvous, identity, secret, deadline, sockets);
  } catch (...) {
    ::close(listener);
    for (const int fd : sockets) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    throw;
  }
  ::close(listener);
  for (const int fd : sockets) {
    if (fd >= 0) {
      set_nodelay(fd);
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  return std::unique_ptr<RailLink>(new RailLink(rendezvous, name, std::move(sockets)));
}

}  // namespace c10d_func
