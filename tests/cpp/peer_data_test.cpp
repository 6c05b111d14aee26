// The parsers of what peers and the store send (the rail link's address records and hellos, the
// shm segment's header, record, placements and counts): each well-formed value is taken, every
// malformed one named, and random bytes, truncations and single-byte flips never crash a parser
// nor pass as valid (built with ASan+UBSan by scripts/test.sh). And what Yama is told about who
// may attach to a member.
#include "transports/hierarchy/rail_handshake.h"
#include "transports/shm/cross_memory.h"
#include "transports/shm/shm_checks.h"
#include "transports/shm/shm_layout.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace c10d_func {
namespace {

rail::Secret counting_secret() {
  rail::Secret secret{};
  for (size_t i = 0; i < secret.size(); ++i) {
    secret[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  return secret;
}

std::string random_bytes(std::mt19937_64& random, size_t length) {
  std::string bytes(length, '\0');
  for (auto& byte : bytes) {
    byte = static_cast<char>(random() & 0xff);
  }
  return bytes;
}

TEST(RailHandshake, AddressRecordsRoundTrip) {
  const rail::Secret secret = counting_secret();
  for (const std::string host : {"10.0.0.1", "fe80::1%veth0", "::1"}) {
    const auto parsed = rail::parse_address_record(rail::address_record(host, 41000, secret));
    ASSERT_TRUE(parsed.error.empty()) << parsed.error;
    EXPECT_TRUE(parsed.listens);
    EXPECT_EQ(parsed.host, host);
    EXPECT_EQ(parsed.port, 41000);
    EXPECT_EQ(parsed.secret, secret);
  }
  const auto none = rail::parse_address_record(rail::kNoAddress);
  EXPECT_TRUE(none.error.empty());
  EXPECT_FALSE(none.listens);
}

TEST(RailHandshake, MalformedAddressRecordsAreNamed) {
  const std::string secret(64, 'a');
  for (const std::string record :
       {std::string(""), std::string("10.0.0.1 4000"), "10.0.0.1 0 " + secret,
        "10.0.0.1 65536 " + secret, "10.0.0.1 -1 " + secret, "10.0.0.1 80x " + secret,
        "10.0.0.1 80 " + secret + "a", "10.0.0.1 80 " + std::string(64, 'G'),
        "10.0.0.1 80 " + std::string(64, 'A'), "host name 80 " + secret, "10.0.0.1\n 80 " + secret,
        std::string(65, '1') + " 80 " + secret, "10.0.0.1  80 " + secret,
        "10.0.0.1 80 " + secret + " extra", "abc 80 " + secret, "10.0.0 80 " + secret,
        "10.0.0.1%eth0 80 " + secret, "fe80::1% 80 " + secret, "1:2:3 80 " + secret}) {
    const auto parsed = rail::parse_address_record(record);
    EXPECT_FALSE(parsed.error.empty()) << "took: " << record;
    EXPECT_FALSE(parsed.listens) << record;
  }
}

TEST(RailHandshake, OnlyTheRightHelloIsAccepted) {
  const rail::Secret secret = counting_secret();
  const uint64_t identity = rail::job_identity("tag='x', chunk [0, 1, 2, 3] (rail 0's link)");
  const rail::Hello hello = rail::make_hello(2, identity, secret);
  const auto taken = rail::check_hello(hello.data(), hello.size(), identity, secret, 0, 4);
  EXPECT_EQ(taken.position, 2);
  EXPECT_TRUE(taken.refused.empty());

  rail::Secret other = secret;
  other[31] ^= 1;
  const uint64_t other_job = rail::job_identity("tag='y', chunk [0, 1] (rail 0's link)");
  const auto refused = [&](const rail::Hello& candidate, int64_t me, int64_t size,
                           const char* why) {
    const auto verdict =
        rail::check_hello(candidate.data(), candidate.size(), identity, secret, me, size);
    EXPECT_EQ(verdict.position, -1) << why;
    EXPECT_NE(verdict.refused.find(why), std::string::npos) << verdict.refused;
  };
  refused(rail::make_hello(2, identity, other), 0, 4, "wrong secret");
  refused(rail::make_hello(2, other_job, secret), 0, 4, "another job");
  refused(rail::make_hello(0, identity, secret), 0, 4, "position 0");    // itself
  refused(rail::make_hello(1, identity, secret), 1, 4, "position 1");    // not above
  refused(rail::make_hello(4, identity, secret), 0, 4, "position 4");    // past the rail
  refused(rail::make_hello(-3, identity, secret), 0, 4, "position -3");  // negative
  rail::Hello old_protocol = hello;
  old_protocol[7] = '1';  // 01: headers without an all_to_all's part layouts
  refused(old_protocol, 0, 4, "another version");
  EXPECT_EQ(rail::check_hello(hello.data(), hello.size() - 1, identity, secret, 0, 4).position, -1);
}

TEST(RailHandshake, FreshSecretsDiffer) {
  EXPECT_NE(rail::fresh_secret(), rail::fresh_secret());
}

TEST(PeerDataFuzz, RandomAndMutatedInputsNeverPass) {
  std::mt19937_64 random(20261126);
  const rail::Secret secret = counting_secret();
  const uint64_t identity = rail::job_identity("group");
  const std::string record = rail::address_record("10.1.2.3", 5000, secret);
  const rail::Hello hello = rail::make_hello(1, identity, secret);
  for (int round = 0; round < 20000; ++round) {
    // Random bytes of any length.
    const std::string noise = random_bytes(random, random() % 160);
    const auto parsed = rail::parse_address_record(noise);
    if (parsed.error.empty() && parsed.listens) {
      EXPECT_GE(parsed.port, 1);
      EXPECT_LE(parsed.port, 65535);
      EXPECT_LE(parsed.host.size(), 64u);
    }
    const auto verdict = rail::check_hello(reinterpret_cast<const uint8_t*>(noise.data()),
                                           noise.size(), identity, secret, 0, 2);
    EXPECT_EQ(verdict.position, -1);  // 2^-256 to guess the secret
    // A truncated or one-byte-flipped record or hello.
    std::string mutated = record.substr(0, random() % (record.size() + 1));
    if (!mutated.empty() && random() % 2) {
      mutated[random() % mutated.size()] ^= static_cast<char>(1 + random() % 255);
    }
    const auto reparsed = rail::parse_address_record(mutated);
    if (reparsed.error.empty() && reparsed.listens) {
      // What parses is exactly what a member could have written (a flipped digit is another
      // valid record, refused later by the hello or the connection).
      EXPECT_EQ(rail::address_record(reparsed.host, reparsed.port, reparsed.secret), mutated);
    }
    rail::Hello flipped = hello;
    flipped[random() % flipped.size()] ^= static_cast<uint8_t>(1 + random() % 255);
    const auto flipped_verdict =
        rail::check_hello(flipped.data(), flipped.size(), identity, secret, 0, 2);
    EXPECT_EQ(flipped_verdict.position, -1);
    // The shm record and checks.
    const auto segment = shm::parse_segment_record(noise);
    if (segment.error.empty()) {
      EXPECT_EQ(segment.name[0], '/');
    }
    shm::SegmentHeaderValues header{random(), random() % 8, random(), random(), random()};
    if (random() % 4 == 0) {
      header.magic = shm::kMagic;
    }
    (void)shm::check_segment_header(header, 4, header.nonce, random() % (uint64_t{1} << 50));
    const auto exposed = static_cast<int64_t>(random());
    const uint64_t bytes = random() >> (random() % 64);
    if (shm::check_placement(exposed, bytes, false, 4096, uint64_t{1} << 30).empty()) {
      EXPECT_GE(exposed, 4096);
      EXPECT_LE(static_cast<uint64_t>(exposed) + bytes, uint64_t{1} << 30);
    }
  }
}

TEST(ShmChecks, SegmentRecordsRoundTripAndRefuseOthers) {
  const std::string record = shm::segment_record("/c10d_func_0123abcd_77", 0xfeedfacecafebeefULL);
  const auto parsed = shm::parse_segment_record(record);
  ASSERT_TRUE(parsed.error.empty()) << parsed.error;
  EXPECT_EQ(parsed.name, "/c10d_func_0123abcd_77");
  EXPECT_EQ(parsed.nonce, 0xfeedfacecafebeefULL);
  for (const std::string bad :
       {std::string("/c10d_func_1"), std::string("c10d_func 0000000000000000"),
        std::string("/../etc/x 0000000000000000"), std::string("/a/b 0000000000000000"),
        std::string("/x 000000000000000"), std::string("/x 000000000000000g"),
        std::string("/ 0000000000000000")}) {
    EXPECT_FALSE(shm::parse_segment_record(bad).error.empty()) << bad;
  }
}

TEST(ShmChecks, HeadersOutOfBoundsAreRefusedBeforeAnySizeIsComputed) {
  const uint64_t chunk = 4 << 20;
  const uint64_t region = uint64_t{1} << 30;
  const uint64_t needed = shm::segment_bytes(4, chunk, region);
  shm::SegmentHeaderValues good{shm::kMagic, 4, chunk, region, 42};
  EXPECT_EQ(shm::check_segment_header(good, 4, 42, needed), "");
  const auto refused = [&](shm::SegmentHeaderValues header, uint64_t mapped, const char* why) {
    const std::string wrong = shm::check_segment_header(header, 4, 42, mapped);
    EXPECT_NE(wrong.find(why), std::string::npos) << wrong;
  };
  refused(good, needed - 1, "less than the");
  refused(good, 8, "less than a header");
  refused({0, 4, chunk, region, 42}, needed, "not a c10d_func segment");
  refused({shm::kMagic, 4, chunk, region, 41}, needed, "another group or job");
  refused({shm::kMagic, 5, chunk, region, 42}, needed, "made for 5 members");
  refused({shm::kMagic, 4, ~uint64_t{0}, region, 42}, needed, "chunk");
  refused({shm::kMagic, 4, 100, region, 42}, needed, "chunk");
  refused({shm::kMagic, 4, chunk, ~uint64_t{0} << 12, 42}, needed, "region");
  // At least kAlign bytes of a member's chunk for each member (a piece of all_to_all's slots).
  const uint64_t many = 128;
  const uint64_t small = 4096;
  EXPECT_NE(shm::check_segment_header({shm::kMagic, many, small, region, 42}, many, 42,
                                      shm::segment_bytes(many, small, region))
                .find("too small for 128 members"),
            std::string::npos);
  EXPECT_EQ(shm::check_segment_header({shm::kMagic, many, many * shm::kAlign, region, 42}, many, 42,
                                      shm::segment_bytes(many, many * shm::kAlign, region)),
            "");
}

TEST(ShmChecks, PlacementsStayInTheMembersMemory) {
  const uint64_t begin = 1 << 20, end = 64 << 20;
  EXPECT_EQ(shm::check_placement(begin, end - begin, false, begin, end), "");
  EXPECT_EQ(shm::check_placement(shm::kAttached, 1 << 30, true, begin, end), "");
  EXPECT_NE(shm::check_placement(shm::kAttached, 16, false, begin, end), "");
  EXPECT_NE(shm::check_placement(shm::kUnplaced, 16, true, begin, end), "");
  EXPECT_NE(shm::check_placement(0, 16, false, begin, end), "");  // the header
  EXPECT_NE(shm::check_placement(begin, end - begin + 1, false, begin, end), "");
  EXPECT_NE(shm::check_placement(static_cast<int64_t>(end), 1, false, begin, end), "");
  EXPECT_NE(shm::check_placement(INT64_MAX, ~uint64_t{0}, false, begin, end), "");  // overflow
  EXPECT_EQ(shm::check_count(0, 10), "");
  EXPECT_NE(shm::check_count(-1, 10), "");
  EXPECT_NE(shm::check_count(11, 10), "");
  const char unterminated[4] = {'a', 'b', 'c', 'd'};
  EXPECT_EQ(shm::bounded_text(unterminated, sizeof(unterminated)), "abcd");
  EXPECT_EQ(shm::bounded_text("ab\0cd", 5), "ab");
}

}  // namespace
}  // namespace c10d_func

namespace c10d_func {
namespace {

TEST(CrossMemory, YamaIsToldOnlyWhoMayAttachNow) {
  EXPECT_EQ(shm::ptracer_for({}), 0ul);               // nobody once every permission is gone
  EXPECT_EQ(shm::ptracer_for({4242}), 4242ul);        // one peer: that pid alone
  EXPECT_EQ(shm::ptracer_for({4242, 4242}), 4242ul);  // two permissions naming the same peer
  EXPECT_EQ(shm::ptracer_for({4242, 4243}), shm::kAnyTracer);  // Yama records one tracer
}

TEST(CrossMemory, APermissionEndsWithItsLastHolder) {
  // Without Yama (this machine, most CI) a permission changes nothing and must not fail; with
  // it, the prctl calls are checked by ptracer_for above.
  shm::AttachPermission first({1234});
  {
    shm::AttachPermission second = shm::allow_attach({1235});
    shm::AttachPermission moved(std::move(second));
  }
  shm::AttachPermission none;
  none = std::move(first);
}

}  // namespace
}  // namespace c10d_func
