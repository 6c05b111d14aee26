// See rail_handshake.h.
#include "transports/hierarchy/rail_handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace c10d_func::rail {
namespace {

// "c10dRL" and the protocol's version: a peer of another version is refused by its magic.
// The protocol's version is its last two characters: 02 since a message's header (RailHeader)
// carries an all_to_all's part layouts (48 bytes, was 32), so an older library is refused at the
// hello instead of reading a newer one's header as payload.
constexpr std::array<uint8_t, 8> kMagic = {'c', '1', '0', 'd', 'R', 'L', '0', '2'};
// The longest numeric address (an IPv6 address with a zone index) a record may hold.
constexpr size_t kMaxHostChars = 64;

void put_u64(uint8_t* to, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    to[i] = static_cast<uint8_t>(value >> (8 * i));  // little-endian on every host
  }
}

uint64_t get_u64(const uint8_t* from) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value |= static_cast<uint64_t>(from[i]) << (8 * i);
  }
  return value;
}

// Equal in time that does not depend on where the first difference lies.
bool same_secret(const uint8_t* a, const Secret& b) {
  uint8_t differ = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) {
    differ |= static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return differ == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  return -1;  // upper case is not what address_record writes
}

// Digits, hex letters, '.' and ':' make numeric addresses; a zone index ("%eth0") adds letters,
// '-' and '_'. No space, no control character, nothing getaddrinfo could take for a name.
bool is_numeric_host_char(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return std::isalnum(byte) != 0 || c == '.' || c == ':' || c == '%' || c == '-' || c == '_';
}

// An IPv4 or IPv6 address as inet_ntop writes it, an IPv6 one with a scope after '%' (an
// interface name or index): what a member can have published. Anything else would reach
// getaddrinfo, which fails the members that connect at once but leaves the ones that accept
// waiting for the formation's deadline.
bool is_numeric_address(std::string_view host) {
  const size_t percent = host.find('%');
  const std::string address(host.substr(0, percent));
  unsigned char parsed[sizeof(in6_addr)];
  if (percent == std::string_view::npos) {
    return inet_pton(AF_INET, address.c_str(), parsed) == 1 ||
           inet_pton(AF_INET6, address.c_str(), parsed) == 1;
  }
  return percent + 1 < host.size() && inet_pton(AF_INET6, address.c_str(), parsed) == 1;
}

AddressRecord malformed(std::string why) {
  AddressRecord record;
  record.error = std::move(why);
  return record;
}

}  // namespace

const std::array<uint8_t, kAcceptedBytes> kAccepted = {'c', '1', '0', 'd', 'R', 'L', 'o', 'k'};

Secret fresh_secret() {
  Secret secret{};
  size_t filled = 0;
  while (filled < secret.size()) {
    const ssize_t got = ::getrandom(secret.data() + filled, secret.size() - filled, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      throw std::runtime_error(std::string("c10d_func: no random bytes for a rail's secret: ") +
                               std::strerror(errno));
    }
    filled += static_cast<size_t>(got);
  }
  return secret;
}

uint64_t job_identity(std::string_view group) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : group) {
    hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  }
  return hash;
}

std::string address_record(const std::string& address, int port, const Secret& secret) {
  static const char* const digits = "0123456789abcdef";
  std::string record = address + " " + std::to_string(port) + " ";
  for (const uint8_t byte : secret) {
    record += digits[byte >> 4];
    record += digits[byte & 0xf];
  }
  return record;
}

AddressRecord parse_address_record(std::string_view record) {
  if (record == kNoAddress) {
    return {};
  }
  const size_t first = record.find(' ');
  const size_t second = first == std::string_view::npos ? first : record.find(' ', first + 1);
  if (second == std::string_view::npos || record.find(' ', second + 1) != std::string_view::npos) {
    return malformed("not '<address> <port> <secret>'");
  }
  const std::string_view host = record.substr(0, first);
  const std::string_view port = record.substr(first + 1, second - first - 1);
  const std::string_view secret = record.substr(second + 1);
  if (host.empty() || host.size() > kMaxHostChars) {
    return malformed("an address of " + std::to_string(host.size()) + " characters");
  }
  for (const char c : host) {
    if (!is_numeric_host_char(c)) {
      return malformed("a character that no numeric address has");
    }
  }
  if (!is_numeric_address(host)) {
    return malformed("an address that is neither IPv4 nor IPv6");
  }
  if (port.empty() || port.size() > 5) {
    return malformed("a port that is not 1..65535");
  }
  int port_number = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') {
      return malformed("a port that is not 1..65535");
    }
    port_number = port_number * 10 + (c - '0');
  }
  if (port_number < 1 || port_number > 65535) {
    return malformed("a port that is not 1..65535");
  }
  if (secret.size() != 2 * kSecretBytes) {
    return malformed("a secret of " + std::to_string(secret.size()) + " hex digits, not " +
                     std::to_string(2 * kSecretBytes));
  }
  AddressRecord parsed;
  for (size_t i = 0; i < kSecretBytes; ++i) {
    const int high = hex_value(secret[2 * i]);
    const int low = hex_value(secret[2 * i + 1]);
    if (high < 0 || low < 0) {
      return malformed("a secret that is not lower-case hex");
    }
    parsed.secret[i] = static_cast<uint8_t>(high << 4 | low);
  }
  parsed.listens = true;
  parsed.host = std::string(host);
  parsed.port = port_number;
  return parsed;
}

Hello make_hello(int64_t position, uint64_t identity, const Secret& secret) {
  Hello hello{};
  std::memcpy(hello.data(), kMagic.data(), kMagic.size());
  put_u64(hello.data() + 8, static_cast<uint64_t>(position));
  put_u64(hello.data() + 16, identity);
  std::memcpy(hello.data() + 24, secret.data(), kSecretBytes);
  return hello;
}

HelloVerdict check_hello(const uint8_t* bytes, size_t length, uint64_t identity,
                         const Secret& secret, int64_t me, int64_t size) {
  HelloVerdict verdict;
  if (length != kHelloBytes) {
    verdict.refused = "a hello of " + std::to_string(length) + " bytes";
    return verdict;
  }
  if (std::memcmp(bytes, kMagic.data(), kMagic.size()) != 0) {
    verdict.refused = "not c10d_func's rail protocol (or another version of it)";
    return verdict;
  }
  if (get_u64(bytes + 16) != identity) {
    verdict.refused = "another job or group";
    return verdict;
  }
  if (!same_secret(bytes + 24, secret)) {
    verdict.refused = "a wrong secret";
    return verdict;
  }
  const auto position = static_cast<int64_t>(get_u64(bytes + 8));
  if (position <= me || position >= size) {
    verdict.refused =
        "position " + std::to_string(position) + ", not one that connects to " + std::to_string(me);
    return verdict;
  }
  verdict.position = position;
  return verdict;
}

}  // namespace c10d_func::rail
