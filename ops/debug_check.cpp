// See debug_check.h.
#include "ops/debug_check.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <c10/util/Exception.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

namespace c10d_func {

bool debug_checks_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("C10D_FUNC_DEBUG");
    return value != nullptr && std::string_view(value) == "DETAIL";
  }();
  return enabled;
}

void check_members_agree(std::string_view op, const World& world, const std::string& device,
                         const std::string& tag, const Chunk& chunk,
                         const std::string& fingerprint) {
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
                                                      thread_connection(world.store));
  store->set(std::to_string(chunk.index),
             std::vector<uint8_t>(fingerprint.begin(), fingerprint.end()));
  std::vector<std::string> keys;
  for (int64_t i = 0; i < chunk.size(); ++i) {
    keys.push_back(std::to_string(i));
  }
  store->wait(keys, collective_timeout());
  bool agree = true;
  std::ostringstream calls;
  for (int64_t i = 0; i < chunk.size(); ++i) {
    const auto bytes = store->get(keys[i]);
    const std::string theirs(bytes.begin(), bytes.end());
    agree = agree && theirs == fingerprint;
    calls << "\n  rank " << chunk.members[i] << ": " << theirs;
  }
  TORCH_CHECK(agree, "c10d_func.", op, ": the members of chunk ", chunk.describe(), " (tag='", tag,
              "') disagree on collective #", number, " (C10D_FUNC_DEBUG=DETAIL):", calls.str());
}

}  // namespace c10d_func
