#pragma once
// A real TCPStore server in the test process, on a free port, for the tests of what the library
// keeps in a store.
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>

namespace c10d_func {

inline c10::intrusive_ptr<c10d::TCPStore> tcp_store_server() {
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(10);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

}  // namespace c10d_func
