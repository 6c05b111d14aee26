#pragma once
// A ProcessGroup written in Python, as a Communicator: its collectives are its own Python methods,
// reached through a Python caller (c10d_func._registry.call_group_method) that picks the method
// names the group defines (they differ across torch versions) and builds their options. The C++
// virtual methods of such a group reach Python only for the names each torch version's
// trampoline forwards, so they are not used.
#include <torch/csrc/utils/pybind.h>

#include "transports/communicator.h"

#include <memory>
#include <string>

namespace c10d_func {

// A Python object kept by C++: its reference is dropped only with the GIL held, and not at all
// once the interpreter is gone (the registry that holds most of them is never destroyed).
std::shared_ptr<pybind11::object> hold_python(pybind11::object object);

struct PythonGroupTraits {
  int64_t rank = -1;
  int64_t size = 0;
  std::string name;
  bool has_reduce = true;
  bool has_reduce_scatter = true;
};

// `group` and `caller` are held until the communicator goes, and released under the GIL.
std::shared_ptr<Communicator> make_python_group_communicator(pybind11::object group,
                                                             pybind11::object caller,
                                                             PythonGroupTraits traits);

}  // namespace c10d_func
