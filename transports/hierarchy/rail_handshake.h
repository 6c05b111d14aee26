#pragma once
// How the members of a rail prove to each other that a connection belongs to the job (see
// rail_link.h), as pure functions over bytes, so that every parser of what a peer or the store
// sends can be checked (and fuzzed) without sockets:
//
// - Each member that accepts connections draws a fresh secret for this formation (getrandom) and
//   publishes it beside its address in the job's store: "<address> <port> <secret hex>", or
//   "none" when it has no address its peers can reach. The store is the root of trust: whoever
//   can read it can join; a process that only finds the port cannot.
// - A connecting member first sends a hello: a magic with the protocol's version, its position
//   in the rail, the job's identity (a hash of the group's name) and the acceptor's secret. The
//   acceptor checks every field (the secret in constant time) before the connection takes a
//   slot, answers kAccepted, and closes anything else and goes on accepting.
//
// Nothing here is encrypted: an on-path attacker can read and alter the traffic (use a trusted
// network, as for Gloo and torch's store). A secret is used by one formation only, and a slot
// once taken is not given to a second connection, so replaying a hello seen on the wire takes
// nothing.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace c10d_func::rail {

constexpr size_t kSecretBytes = 32;
using Secret = std::array<uint8_t, kSecretBytes>;

// A fresh secret from the kernel's random source; throws std::runtime_error when there is none.
Secret fresh_secret();

// What identifies the job to a connection: a hash (FNV-1a) of the rendezvous's group name.
uint64_t job_identity(std::string_view group);

// The store's record of a member's listener, and of a member without one.
std::string address_record(const std::string& address, int port, const Secret& secret);
constexpr std::string_view kNoAddress = "none";

// A record read from the store: `error` says what is wrong with a malformed one (then nothing
// else is set); `listens` is false for kNoAddress.
struct AddressRecord {
  bool listens = false;
  std::string host;  // a numeric IPv4 or IPv6 address (getaddrinfo with AI_NUMERICHOST)
  int port = 0;
  Secret secret{};
  std::string error;
};
AddressRecord parse_address_record(std::string_view record);

// The hello a connecting member sends: magic (8) + position (8) + identity (8) + secret (32).
constexpr size_t kHelloBytes = 56;
using Hello = std::array<uint8_t, kHelloBytes>;
Hello make_hello(int64_t position, uint64_t identity, const Secret& secret);

// The acceptor's answer to a hello it took.
constexpr size_t kAcceptedBytes = 8;
extern const std::array<uint8_t, kAcceptedBytes> kAccepted;

// A received hello, checked by the member at `me` of a rail of `size` that expects `identity`
// and `secret`: the position it proves (in (me, size)), or, with position -1, why it is refused.
struct HelloVerdict {
  int64_t position = -1;
  std::string refused;
};
HelloVerdict check_hello(const uint8_t* bytes, size_t length, uint64_t identity,
                         const Secret& secret, int64_t me, int64_t size);

}  // namespace c10d_func::rail
