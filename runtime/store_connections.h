#pragma once
// Connections to the job's store for c10d_func's own use: rendezvous of every communicator and
// message channel, roll calls, debug checks, flight-recorder dump requests.
//
// A TCPStore client serves one request at a time, and a blocking wait holds it: two threads
// waiting on one client for keys that only their peers' other threads set would deadlock across
// processes. So no request of c10d_func shares a client with another request in flight. It used
// to take a clone of the store (a new TCP connection) per communicator and message channel on
// every member, and each connect costs more than the socket: torch's client and server each look
// up the peer's name for every connection (a reverse DNS query, which stalls 5 s where a resolver
// drops queries, the server's loop included, so every rank waited).
//
// Now the stores handed out lend a connection per request: each request takes an idle client
// of its store's pool (making one only when every client is busy) and gives it back when it
// returns. A process holds, per store, one connection to clone from and as many as it ever had
// requests in flight at once.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>

namespace c10d_func {

// `store` as a store of the caller's own: the same keys (its PrefixStore layers kept), each
// request on a connection no other request uses meanwhile. Where the store cannot be cloned
// (some stores written in Python), `store` itself, shared as before.
c10::intrusive_ptr<c10d::Store> private_connection(const c10::intrusive_ptr<c10d::Store>& store);

// How many connections the pools of this process hold, idle or lent (for tests and groups()).
int64_t store_connections_held();

}  // namespace c10d_func
