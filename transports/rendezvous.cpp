// Sub-rendezvous and the all-gather through the store; see rendezvous.h.
#include "transports/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

namespace c10d_func {

Rendezvous Rendezvous::under(const std::string& prefix) const {
  Rendezvous sub = *this;
  sub.store = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  return sub;
}

std::string shared_device(c10::Device device) {
  return c10::DeviceTypeName(device.type(), /*lower_case=*/true);
}

std::vector<std::vector<uint8_t>> store_all_gather(c10d::Store& store, const std::string& key,
                                                   int64_t rank, int64_t size,
                                                   const std::vector<uint8_t>& mine,
                                                   std::chrono::milliseconds timeout,
                                                   size_t max_bytes) {
  store.set(key + "/" + std::to_string(rank), mine);
  std::vector<std::string> keys;
  keys.reserve(size);
  for (int64_t member = 0; member < size; ++member) {
    keys.push_back(key + "/" + std::to_string(member));
  }
  store.wait(keys, timeout);
  std::vector<std::vector<uint8_t>> values;
  values.reserve(size);
  for (int64_t member = 0; member < size; ++member) {
    std::vector<uint8_t> value = member == rank ? mine : store.get(keys[member]);
    if (value.size() > max_bytes) {
      value.resize(max_bytes);
    }
    values.push_back(std::move(value));
  }
  return values;
}

std::vector<std::vector<uint8_t>> store_all_gather(const Rendezvous& rendezvous,
                                                   const std::string& key,
                                                   const std::vector<uint8_t>& mine,
                                                   size_t max_bytes) {
  return store_all_gather(*rendezvous.store, key, rendezvous.rank, rendezvous.size, mine,
                          rendezvous.remaining(), max_bytes);
}

std::vector<std::string> store_all_gather_text(const Rendezvous& rendezvous, const std::string& key,
                                               const std::string& mine, size_t max_bytes) {
  std::vector<std::string> texts;
  for (const auto& value :
       store_all_gather(rendezvous, key, {mine.begin(), mine.end()}, max_bytes)) {
    texts.emplace_back(value.begin(), value.end());
  }
  return texts;
}

}  // namespace c10d_func
