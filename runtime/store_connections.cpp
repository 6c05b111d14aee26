// Stores that lend a pooled connection per request; see store_connections.h.
#include "runtime/store_connections.h"

#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace c10d_func {
namespace {

std::atomic<int64_t> connections_held{0};

// The clients of one store (one server). `source_` is a client made for cloning alone: no request
// runs on it and its timeout never changes, so cloning it while other threads hold clients
// reads nothing they write, and the pool does not keep torch's own store object (the server,
// on the rank that hosts it) alive.
class ClientPool {
 public:
  explicit ClientPool(c10::intrusive_ptr<c10d::Store> source) : source_(std::move(source)) {
    ++connections_held;
  }
  ~ClientPool() { connections_held -= static_cast<int64_t>(idle_.size()) + 1; }

  // A process forked from the pool's holds the same sockets: it makes clients of its own and
  // gives none back, so no connection carries two processes' requests.
  bool owned_here() const { return ::getpid() == owner_; }

  c10::intrusive_ptr<c10d::Store> take() {
    if (owned_here()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        auto client = std::move(idle_.back());
        idle_.pop_back();
        return client;
      }
    }
    // Outside the lock: a connect may take a while, and other requests may find an idle client.
    auto client = source_->clone();
    ++connections_held;
    return client;
  }

  void give_back(c10::intrusive_ptr<c10d::Store> client) {
    if (!owned_here()) {
      drop(std::move(client));
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(client));
  }

  // A client whose request failed may have a reply still on its way: it is closed, not reused.
  static void drop(c10::intrusive_ptr<c10d::Store> client) {
    client.reset();
    --connections_held;
  }

  bool extended_api() const { return source_->hasExtendedApi(); }

 private:
  const c10::intrusive_ptr<c10d::Store> source_;
  const pid_t owner_ = ::getpid();
  std::mutex mutex_;
  std::vector<c10::intrusive_ptr<c10d::Store>> idle_;
};

// A store whose every request runs on a client of the pool no other request uses meanwhile.
class PooledStore : public c10d::Store {
 public:
  PooledStore(std::shared_ptr<ClientPool> pool, std::chrono::milliseconds timeout)
      : pool_(std::move(pool)) {
    timeout_ = timeout;
  }

  const std::shared_ptr<ClientPool>& pool() const { return pool_; }

  c10::intrusive_ptr<c10d::Store> clone() override {
    return c10::make_intrusive<PooledStore>(pool_, timeout_);
  }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    lend([&](c10d::Store& client) { client.set(key, value); });
  }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return lend([&](c10d::Store& client) { return client.compareSet(key, expected, desired); });
  }
  std::vector<uint8_t> get(const std::string& key) override {
    return lend([&](c10d::Store& client) { return client.get(key); });
  }
  int64_t add(const std::string& key, int64_t value) override {
    return lend([&](c10d::Store& client) { return client.add(key, value); });
  }
  bool deleteKey(const std::string& key) override {
    return lend([&](c10d::Store& client) { return client.deleteKey(key); });
  }
  bool check(const std::vector<std::string>& keys) override {
    return lend([&](c10d::Store& client) { return client.check(keys); });
  }
  int64_t getNumKeys() override {
    return lend([&](c10d::Store& client) { return client.getNumKeys(); });
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    lend([&](c10d::Store& client) { client.wait(keys, timeout); });
  }
  void append(const std::string& key, const std::vector<uint8_t>& value) override {
    lend([&](c10d::Store& client) { client.append(key, value); });
  }
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override {
    return lend([&](c10d::Store& client) { return client.multiGet(keys); });
  }
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::vector<uint8_t>>& values) override {
    lend([&](c10d::Store& client) { client.multiSet(keys, values); });
  }
  bool hasExtendedApi() const override { return pool_->extended_api(); }
  void queuePush(const std::string& key, const std::vector<uint8_t>& value) override {
    lend([&](c10d::Store& client) { client.queuePush(key, value); });
  }
  std::vector<uint8_t> queuePop(const std::string& key, bool block) override {
    return lend([&](c10d::Store& client) { return client.queuePop(key, block); });
  }
  int64_t queueLen(const std::string& key) override {
    return lend([&](c10d::Store& client) { return client.queueLen(key); });
  }
  std::vector<std::string> listKeys() override {
    return lend([&](c10d::Store& client) { return client.listKeys(); });
  }

 private:
  // Runs `request` on a client of its own, with this store's timeout (a client's blocking
  // requests use its own: get and queuePop wait with it).
  template <typename Request>
  auto lend(Request&& request) -> decltype(request(std::declval<c10d::Store&>())) {
    auto client = pool_->take();
    try {
      if (client->getTimeout() != timeout_) {
        client->setTimeout(timeout_);
      }
      if constexpr (std::is_void_v<decltype(request(*client))>) {
        request(*client);
        pool_->give_back(std::move(client));
      } else {
        auto result = request(*client);
        pool_->give_back(std::move(client));
        return result;
      }
    } catch (...) {
      ClientPool::drop(std::move(client));
      throw;
    }
  }

  std::shared_ptr<ClientPool> pool_;
};

// Reads a PrefixStore's prefix, which torch keeps protected with no getter: a member pointer
// formed in a derived class's scope may be applied to any PrefixStore.
struct PrefixReader : c10d::PrefixStore {
  static const std::string& prefix_of(const c10d::PrefixStore& store) {
    return store.*(&PrefixReader::prefix_);
  }
};

// One pool per store object that requests reach the server through (the root under the
// PrefixStore layers). A pool lives while its store does (found gone at a later lookup), not
// while its lent stores do: communicators drop theirs once formed, and the next group's
// formation must find the pool's clients idle, not connect again.
std::shared_ptr<ClientPool> pool_for(const c10::intrusive_ptr<c10d::Store>& root) {
  if (auto* pooled = dynamic_cast<PooledStore*>(root.get())) {
    return pooled->pool();
  }
  struct Entry {
    c10::weak_intrusive_ptr<c10d::Store> root;
    std::shared_ptr<ClientPool> pool;
  };
  static std::mutex mutex;
  static auto* pools = new std::map<const c10d::Store*, Entry>();  // lives until exit
  std::lock_guard<std::mutex> lock(mutex);
  // Pools of stores gone: their address may be a new store's, and their clients' server may
  // be gone with them.
  for (auto it = pools->begin(); it != pools->end();) {
    it = it->second.root.expired() ? pools->erase(it) : ++it;
  }
  auto found = pools->find(root.get());
  if (found != pools->end() && found->second.pool->owned_here()) {
    return found->second.pool;
  }
  auto pool = std::make_shared<ClientPool>(root->clone());
  pools->erase(root.get());  // a pool of the process this one was forked from
  pools->emplace(root.get(), Entry{c10::weak_intrusive_ptr<c10d::Store>(root), pool});
  return pool;
}

}  // namespace

c10::intrusive_ptr<c10d::Store> private_connection(const c10::intrusive_ptr<c10d::Store>& store) {
  std::vector<std::string> prefixes;  // outermost first
  c10::intrusive_ptr<c10d::Store> root = store;
  while (auto* layer = dynamic_cast<c10d::PrefixStore*>(root.get())) {
    prefixes.push_back(PrefixReader::prefix_of(*layer));
    root = layer->getUnderlyingStore();
  }
  std::shared_ptr<ClientPool> pool;
  try {
    pool = pool_for(root);
  } catch (const std::exception&) {
    return store;  // a store that cannot be cloned (some Python stores): shared, as before
  }
  c10::intrusive_ptr<c10d::Store> connection =
      c10::make_intrusive<PooledStore>(pool, store->getTimeout());
  for (auto it = prefixes.rbegin(); it != prefixes.rend(); ++it) {
    connection = c10::make_intrusive<c10d::PrefixStore>(*it, connection);
  }
  return connection;
}

int64_t store_connections_held() {
  return connections_held.load();
}

}  // namespace c10d_func
