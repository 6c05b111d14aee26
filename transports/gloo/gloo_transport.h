#pragma once
// The Gloo transport: torch's ProcessGroupGloo, one per (device, tag, chunk), driven through its
// c10d::Backend methods by the c10d communicator (transports/c10d). Gloo serves CPU groups that
// span hosts, and CUDA tensors on request.
//
// The ProcessGroupGloo is made here, in C++, when the build found Gloo's headers (torch's wheel
// ships none; Debian's libgloo-dev provides them, and ProcessGroupGloo holds Gloo's types only
// behind pointers, so its layout does not depend on Gloo's version). Otherwise the Python package
// installs torch's own constructor as the maker (python/c10d_func/_registry.py), and a program
// without Python runs groups inside one host only.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "transports/rendezvous.h"

#include <functional>
#include <optional>

namespace c10d_func {

// Makes the ProcessGroupGloo of one rendezvous (its store, rank, size and timeout).
using GlooMaker = std::function<c10::intrusive_ptr<c10d::Backend>(const Rendezvous&)>;

// The transport named "gloo" over `make`.
Transport gloo_transport(GlooMaker make);

// The maker built in C++ (options from the environment as torch's: GLOO_SOCKET_IFNAME, ...), or
// nullopt when the library was built without Gloo's headers.
std::optional<GlooMaker> native_gloo_maker();

}  // namespace c10d_func
