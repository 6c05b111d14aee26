// See debug_check.h.
#include "runtime/debug_check.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <c10/util/Exception.h>

#include "runtime/store_connections.h"
#include "transports/rank_format.h"
#include "transports/rendezvous.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

namespace c10d_func {

namespace {

// The variable that turned the check on ("C10D_FUNC_DEBUG"), or nullptr. torch's switch turns
// it on too: one switch for both.
const char* debug_switch() {
  static const char* const name = []() -> const char* {
    for (const char* candidate : {"C10D_FUNC_DEBUG", "TORCH_DISTRIBUTED_DEBUG"}) {
      const char* value = std::getenv(candidate);
      if (value != nullptr && std::string_view(value) == "DETAIL") {
        return candidate;
      }
    }
    return nullptr;
  }();
  return name;
}

}  // namespace

bool debug_checks_enabled() {
  return debug_switch() != nullptr;
}

namespace {

std::vector<uint8_t> as_bytes(const std::vector<int64_t>& values) {
  const auto* begin = reinterpret_cast<const uint8_t*>(values.data());
  return {begin, begin + values.size() * sizeof(int64_t)};
}

std::vector<int64_t> as_values(const std::vector<uint8_t>& bytes) {
  std::vector<int64_t> values(bytes.size() / sizeof(int64_t));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(int64_t));
  return values;
}

// The first pair of members whose splits do not pair up, described; empty when all do.
std::string unpaired_splits(const Chunk& chunk, const std::vector<std::vector<int64_t>>& splits) {
  const auto n = static_cast<size_t>(chunk.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (splits[i].size() != 2 * n || splits[j].size() != 2 * n) {
        return "\n  members published splits of different lengths";
      }
      const int64_t sends = splits[i][j];         // i's input split for j
      const int64_t expected = splits[j][n + i];  // j's output split for i
      if (sends != expected) {
        return "\n  rank " + std::to_string(chunk.members[i]) + " sends " + std::to_string(sends) +
               " rows to rank " + std::to_string(chunk.members[j]) + ", which expects " +
               std::to_string(expected);
      }
    }
  }
  return "";
}

// "; ranks 1, 3 did not" for the members whose fingerprint is not in `store`; empty where the
// store cannot say.
std::string silent_members(c10d::Store& store, const Chunk& chunk) {
  std::vector<int64_t> silent;
  try {
    for (int64_t i = 0; i < chunk.size(); ++i) {
      if (!store.check({"fingerprint/" + std::to_string(i)})) {
        silent.push_back(chunk.members[i]);
      }
    }
  } catch (const std::exception&) {
    return "";
  }
  return silent.empty() ? "" : "; ranks " + format_ranks(silent) + " did not";
}

}  // namespace

void check_members_agree(std::string_view op, const World& world, const std::string& device,
                         const std::string& tag, const Chunk& chunk, const std::string& fingerprint,
                         const std::vector<int64_t>& splits) {
  // Members call collectives in the same order, so a per-chunk counter names the same call on
  // every member.
  static std::mutex mutex;
  static auto* sequence = new std::map<std::string, int64_t>();
  const std::string chunk_key = "c10d_func/debug/" + device + "/" + tag + "/" + chunk.describe();
  int64_t number = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    number = (*sequence)[chunk_key]++;
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>(chunk_key + "/" + std::to_string(number),
                                                      private_connection(world.store));
  if (!splits.empty()) {
    // Before the fingerprint others wait on.
    store->set("splits/" + std::to_string(chunk.index), as_bytes(splits));
  }
  std::vector<std::vector<uint8_t>> fingerprints;
  try {
    fingerprints = store_all_gather(*store, "fingerprint", chunk.index, chunk.size(),
                                    std::vector<uint8_t>(fingerprint.begin(), fingerprint.end()),
                                    collective_timeout());
  } catch (const c10::Error& error) {
    TORCH_CHECK(false, "c10d_func.", op, ": the members of chunk ", chunk.describe(), " (tag='",
                tag, "') did not all publish collective #", number, " for the ", debug_switch(),
                "=DETAIL check", silent_members(*store, chunk),
                ": a member that has not reached this call, or that runs without the check, never "
                "does (the check must be on for every member or for none): ",
                error.what_without_backtrace());
  }
  bool agree = true;
  std::ostringstream calls;
  for (int64_t i = 0; i < chunk.size(); ++i) {
    const std::string theirs(fingerprints[i].begin(), fingerprints[i].end());
    agree = agree && theirs == fingerprint;
    // Another member's fingerprint, shown as it came (cut: it is read from the store).
    calls << "\n  rank " << chunk.members[i] << ": " << theirs.substr(0, 1000);
  }
  std::string unpaired;
  if (agree && !splits.empty()) {
    std::vector<std::vector<int64_t>> all;
    for (int64_t i = 0; i < chunk.size(); ++i) {
      all.push_back(as_values(store->get("splits/" + std::to_string(i))));
    }
    unpaired = unpaired_splits(chunk, all);
    agree = unpaired.empty();
  }
  TORCH_CHECK(agree, "c10d_func.", op, ": the members of chunk ", chunk.describe(), " (tag='", tag,
              "') disagree on collective #", number, " (", debug_switch(), "=DETAIL):", calls.str(),
              unpaired);
}

}  // namespace c10d_func
