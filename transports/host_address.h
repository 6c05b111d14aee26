#pragma once
// Which address of this host its peers on other hosts reach it at, for transports that listen
// (Gloo's device, the hierarchy's leaders' link). Hosts whose name resolves only to loopback
// (containers, network namespaces, many clusters without DNS for their nodes) need more than
// torch's default, which falls back to loopback there.
#include <optional>
#include <string>

namespace c10d_func {

// A non-loopback address this host's name resolves to, if any (torch's default device binds to
// it).
std::optional<std::string> hostname_address();

// The address this host sends from to reach `peer` (the interface its route takes), found with
// a connected UDP socket, which sends nothing; nothing for a peer reached over loopback.
std::optional<std::string> address_towards(const std::string& peer);

// The first IPv4 address of the network interface `name` (as GLOO_SOCKET_IFNAME names one).
std::optional<std::string> interface_address(const std::string& name);

// The address peers reach this host at, chosen as Gloo's device is (gloo_transport.cpp): the
// first interface GLOO_SOCKET_IFNAME names; else the host name's address; else the address of
// the interface that reaches the world's store (MASTER_ADDR), which every member reaches.
std::optional<std::string> address_for_peers();

}  // namespace c10d_func
