// c10d_func._C: the Python face of the native registry. Loading it loads libc10d_func.so, whose
// static registrations create torch.ops.c10d_func.*. It also lets the Python package install the
// two things only Python can provide: the default process group as a world, and the Gloo backend
// (torch does not ship Gloo's headers, so ProcessGroupGloo is built through its Python binding).
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "backend/func_backend.h"
#include "kernels/c_shims.h"
#include "ops/op_list.h"
#include "python/csrc/python_group.h"
#include "runtime/group_registry.h"
#include "runtime/message_routes.h"
#include "runtime/pending_work.h"
#include "runtime/store_connections.h"
#include "transports/byte_reduce.h"
#include "transports/c10d/group_communicator.h"
#include "transports/gloo/gloo_transport.h"
#include "transports/shm/shm_checks.h"

#include <chrono>
#include <memory>

namespace py = pybind11;

namespace c10d_func {
namespace {

c10::DeviceType parse_device(const std::string& device) {
  return c10::Device(device).type();
}

void set_world_provider(py::object provider) {
  auto held = hold_python(std::move(provider));
  GroupRegistry::instance().set_world_provider([held]() -> std::optional<World> {
    py::gil_scoped_acquire gil;
    py::object found = (*held)();
    if (found.is_none()) {
      return std::nullopt;
    }
    auto [store, rank, size, delegated, per_thread] =
        found.cast<std::tuple<c10::intrusive_ptr<c10d::Store>, int64_t, int64_t, bool, bool>>();
    return World{store, rank, size, "default process group", delegated, per_thread};
  });
}

void set_group_binder(py::object binder) {
  auto held = hold_python(std::move(binder));
  GroupRegistry::instance().set_group_binder([held](std::string_view op, c10::Device device,
                                                    const std::string& tag,
                                                    const std::vector<int64_t>& ranks,
                                                    int64_t group_size, bool delegated) {
    py::gil_scoped_acquire gil;
    return (*held)(std::string(op), device.str(), tag, ranks, group_size, delegated).cast<bool>();
  });
}

// Binds a ProcessGroup written in Python for `device` under `tag`; its collectives are the
// group's own methods, called through `caller`.
void register_python_group(py::object group, py::object caller, const std::string& device,
                           const std::string& tag, std::vector<int64_t> ranks, int64_t rank,
                           const std::string& name, bool has_reduce, bool has_reduce_scatter) {
  PythonGroupTraits traits;
  traits.rank = rank;
  traits.size = static_cast<int64_t>(ranks.size());
  traits.name = name;
  traits.has_reduce = has_reduce;
  traits.has_reduce_scatter = has_reduce_scatter;
  GroupRegistry::instance().register_communicator(
      parse_device(device), tag, std::move(ranks),
      make_python_group_communicator(std::move(group), std::move(caller), std::move(traits)));
}

void add_backend_transport(const std::string& device, const std::string& name, py::object factory) {
  auto held = hold_python(std::move(factory));
  Transport transport = gloo_transport([held](const Rendezvous& rendezvous) {
    py::gil_scoped_acquire gil;
    const double seconds = rendezvous.timeout.count() / 1000.0;
    return (*held)(rendezvous.store, rendezvous.rank, rendezvous.size, seconds)
        .cast<c10::intrusive_ptr<c10d::Backend>>();
  });
  transport.name = name;
  GroupRegistry::instance().add_transport(parse_device(device), std::move(transport));
}

// Binds `backend` for `device` under `tag`. A c10d_func backend lends its own communicators, so
// the functional ops and the group share them; any other backend is called through its methods.
void register_backend(c10::intrusive_ptr<c10d::Backend> backend, const std::string& device,
                      const std::string& tag, std::vector<int64_t> ranks) {
  auto& registry = GroupRegistry::instance();
  const c10::DeviceType type = parse_device(device);
  if (FuncBackend* own = as_func_backend(backend)) {
    for (auto& [formed_on, communicator] : own->communicators()) {
      if (formed_on.type() == type) {
        registry.register_communicator(type, tag, ranks, communicator);
      }
    }
    return;  // a device not formed yet is registered by the backend when it forms it
  }
  registry.register_communicator(type, tag, std::move(ranks), make_backend_communicator(backend));
}

// The pybind11 holder of a FuncBackend: drops its reference with the GIL released, as torch's
// holder for its own backends does. A backend's destructor joins its communicators' progress
// threads, and a thread's last completion may release tensors Python owns, which takes the GIL:
// holding it while joining would deadlock (destroy_process_group would hang).
template <typename T>
class ReleasedWithoutGil {
 public:
  ReleasedWithoutGil() = default;
  ReleasedWithoutGil(const ReleasedWithoutGil&) = default;
  ReleasedWithoutGil(ReleasedWithoutGil&&) noexcept = default;
  ReleasedWithoutGil& operator=(const ReleasedWithoutGil&) = default;
  ReleasedWithoutGil& operator=(ReleasedWithoutGil&&) noexcept = default;
  explicit ReleasedWithoutGil(T* target)
      : target_(c10::intrusive_ptr<T>::unsafe_steal_from_new(target)) {}
  ~ReleasedWithoutGil() {
    if (target_ && PyGILState_Check()) {
      py::gil_scoped_release released;
      target_.reset();
    }
  }
  T* get() const noexcept { return target_.get(); }

 private:
  // The only member: pybind11 also builds this holder from a c10::intrusive_ptr<T> (what the
  // functions return), as torch's own holder, by layout.
  c10::intrusive_ptr<T> target_;
};

}  // namespace
}  // namespace c10d_func

PYBIND11_DECLARE_HOLDER_TYPE(T, c10d_func::ReleasedWithoutGil<T>, true)

namespace c10d_func {
namespace {

c10::intrusive_ptr<c10d::Backend> create_backend(c10::intrusive_ptr<c10d::Store> store,
                                                 int64_t rank, int64_t size, double timeout_seconds,
                                                 std::string name, std::vector<int64_t> members) {
  FuncBackendOptions options;
  options.store = std::move(store);
  options.rank = rank;
  options.size = size;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0));
  options.name = std::move(name);
  options.members = std::move(members);
  return c10::make_intrusive<FuncBackend>(std::move(options));
}

void split_backend(c10::intrusive_ptr<c10d::Backend> parent,
                   std::optional<c10::intrusive_ptr<c10d::Backend>> child, int64_t color,
                   int64_t key) {
  FuncBackend* own_parent = as_func_backend(parent);
  if (!own_parent) {
    return;  // another backend's communicators cannot be split here; the child forms its own
  }
  FuncBackend* own_child = child ? as_func_backend(*child) : nullptr;
  split_device_communicators(*own_parent, own_child, color, key);
}

py::list groups() {
  py::list out;
  for (const auto& info : GroupRegistry::instance().groups()) {
    py::dict entry;
    entry["device"] = info.device;
    entry["tag"] = info.tag;
    entry["ranks"] = info.members;
    entry["rank"] = info.rank;
    entry["backend"] = info.backend;
    entry["origin"] = info.origin;
    entry["failure"] = info.failure ? py::cast(*info.failure) : py::none();
    py::dict memory;
    for (const auto& [name, value] : info.memory) {
      memory[py::str(name)] = value;
    }
    entry["memory"] = std::move(memory);
    if (info.activity) {
      py::dict activity;
      activity["collectives"] = info.activity->collectives;
      activity["bytes"] = info.activity->bytes;
      activity["busy_seconds"] = info.activity->busy_seconds;
      activity["last_error"] =
          info.activity->last_error ? py::cast(*info.activity->last_error) : py::none();
      entry["activity"] = std::move(activity);
    }
    out.append(std::move(entry));
  }
  return out;
}

py::object world() {
  auto current = GroupRegistry::instance().current_world();
  if (!current) {
    return py::none();
  }
  py::dict entry;
  entry["rank"] = current->rank;
  entry["world_size"] = current->size;
  entry["origin"] = current->origin;
  entry["delegated"] = current->delegated;
  entry["per_thread"] = current->per_thread;
  return std::move(entry);
}

}  // namespace
}  // namespace c10d_func

PYBIND11_MODULE(_C, m) {
  using namespace c10d_func;
  m.doc() = "Native registry of c10d_func; the operators live in torch.ops.c10d_func.";
  m.def(
      "init",
      [](c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size) {
        GroupRegistry::instance().set_world(World{std::move(store), rank, world_size, "init"});
      },
      py::arg("store"), py::arg("rank"), py::arg("world_size"));
  m.def("set_world_provider", &set_world_provider, py::arg("provider"));
  m.def("add_backend_transport", &add_backend_transport, py::arg("device"), py::arg("name"),
        py::arg("factory"));
  m.def(
      "select_transport",
      [](const std::string& device, const std::string& name, const std::string& tag) {
        GroupRegistry::instance().select_transport(parse_device(device), tag, name);
      },
      py::arg("device"), py::arg("name"), py::arg("tag") = "");
  m.def("set_group_binder", &set_group_binder, py::arg("binder"));
  m.def("register_python_group", &register_python_group, py::arg("group"), py::arg("caller"),
        py::arg("device"), py::arg("tag"), py::arg("ranks"), py::arg("rank"), py::arg("name"),
        py::arg("has_reduce"), py::arg("has_reduce_scatter"));
  m.def(
      "world_changed",
      [](bool per_thread, bool initialised) {
        GroupRegistry::instance().world_changed(per_thread, initialised);
      },
      py::call_guard<py::gil_scoped_release>(), py::arg("per_thread"), py::arg("initialised"));
  m.def("register_backend", &register_backend, py::arg("backend"), py::arg("device"),
        py::arg("tag"), py::arg("ranks"));
  m.def(
      "unbind_group",
      [](const std::string& tag, const std::vector<int64_t>& ranks) {
        GroupRegistry::instance().unbind(tag, ranks);
      },
      py::arg("tag"), py::arg("ranks"),
      // A dropped group's last reference may go here, and its backend joins threads that may
      // need the GIL to release tensors Python owns.
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "forget_message_routes", [](const std::string& tag) { forget_message_routes(tag); },
      py::arg("tag"),
      // The routes' channel threads are joined here, and may need the GIL to release tensors.
      py::call_guard<py::gil_scoped_release>());
  // Python sees a FuncBackend as this subclass of torch's Backend (pybind11 finds the most
  // derived registered type), with what torch's Python calls on a backend that splits, and its
  // Options with the transports.
  py::module_::import("torch._C._distributed_c10d");  // registers torch's Backend and Options
  auto backend_class =
      py::class_<FuncBackend, c10d::Backend, ReleasedWithoutGil<FuncBackend>>(m, "FuncBackend")
          .def("perform_nocolor_split", &FuncBackend::perform_nocolor_split,
               py::call_guard<py::gil_scoped_release>(), py::arg("device"),
               "new_group's step on a member outside the new group when the world's device "
               "communicator splits: joins the split as no part.")
          // torch 2.14's Backend binds these three for every backend; 2.11's does not, though
          // its ProcessGroup calls them (split_group, merge_remote_group) and programs read
          // the options all the same.
          .def_property_readonly(
              "options", [](FuncBackend& backend) { return backend.getBackendOptions(); },
              "The group's options: timeout, name, global ranks and transports.")
          .def("split", &FuncBackend::split, py::call_guard<py::gil_scoped_release>(),
               py::arg("store"), py::arg("ranks"), py::arg("opts"),
               "split_group's step: the part `ranks` of this group (None outside it).")
          .def("merge", &FuncBackend::merge, py::call_guard<py::gil_scoped_release>(),
               py::arg("store"), py::arg("opts"), py::arg("rank"), py::arg("size"),
               "merge_remote_group's step: a group of `size` members meeting in `store`.");
  py::class_<FuncBackend::Options, c10d::Backend::Options,
             c10::intrusive_ptr<FuncBackend::Options>>(backend_class, "Options")
      .def_readonly("transport", &FuncBackend::Options::transport,
                    "The transport of each communicator formed so far, e.g. 'cpu:shm'.");
  m.def("create_backend", &create_backend, py::call_guard<py::gil_scoped_release>(),
        py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_seconds"),
        py::arg("name"), py::arg("members"),
        "The c10d_func torch.distributed backend of one group; forms its CPU communicator "
        "among the group's members.");
  m.def("split_backend", &split_backend, py::call_guard<py::gil_scoped_release>(),
        py::arg("parent"), py::arg("child"), py::arg("color"), py::arg("key"),
        "split_group's device step: splits the parent's device communicators (ncclCommSplit).");
  m.def("is_func_backend", [](c10::intrusive_ptr<c10d::Backend> backend) {
    return as_func_backend(backend) != nullptr;
  });
  m.def("groups", &groups);
  m.def("store_connections_held", &store_connections_held,
        "Connections to stores that c10d_func's pools hold, idle or lent.");
  m.def(
      "symmetric_empty",
      [](std::vector<int64_t> sizes, at::ScalarType dtype, const std::string& tag,
         std::vector<int64_t> ranks, int64_t group_size) {
        auto group = GroupRegistry::instance().resolve("empty", c10::Device(c10::kCPU), tag, ranks,
                                                       group_size);
        return group->communicator->new_symmetric(sizes, at::TensorOptions().dtype(dtype));
      },
      py::call_guard<py::gil_scoped_release>(), py::arg("sizes"), py::arg("dtype"), py::arg("tag"),
      py::arg("ranks"), py::arg("group_size"));
  m.def("world", &world);
  m.def(
      "shutdown", [] { GroupRegistry::instance().shutdown(); },
      py::call_guard<py::gil_scoped_release>());
  m.def("pending_count", &pending_count);
  // Tests only: a member writes a bad value where its shm peers read it (shm_checks.h).
  m.def("set_shm_fault_for_test", [](const std::string& kind) { shm::set_fault_for_test(kind); });
  // Tests only: the byte reduction every CPU transport runs (transports/byte_reduce.h) on
  // contiguous CPU tensors of one dtype and size: "loop" (false where it has no loop for the
  // dtype), "aten", or "auto" (reduce_into's choice by size). `output` may be one of `inputs`.
  m.def("reduce_for_test", [](at::Tensor output, const std::vector<at::Tensor>& inputs,
                              const std::string& op, const std::string& way) {
    TORCH_CHECK(output.is_cpu() && output.is_contiguous() && inputs.size() >= 2,
                "reduce_for_test: a contiguous CPU output and two inputs or more");
    std::vector<const char*> sources;
    for (const auto& input : inputs) {
      TORCH_CHECK(input.is_cpu() && input.is_contiguous() &&
                      input.scalar_type() == output.scalar_type() &&
                      input.numel() == output.numel(),
                  "reduce_for_test: inputs as the output");
      sources.push_back(static_cast<const char*>(input.data_ptr()));
    }
    const ReduceOp reduce_op = parse_reduce_op("reduce_for_test", op);
    if (way == "loop") {
      return reduce_in_loop(output.data_ptr(), sources, output.numel(), output.scalar_type(),
                            reduce_op);
    }
    if (way == "aten") {
      reduce_with_aten(output.data_ptr(), sources, output.numel(), output.scalar_type(), reduce_op);
    } else {
      reduce_into(output.data_ptr(), sources, output.numel(), output.scalar_type(), reduce_op);
    }
    return true;
  });
  m.def("has_native_gloo", [] { return native_gloo_maker().has_value(); });
  // The one list of operators (ops/op_list.h), for the Python side: inductor's lowerings and
  // the tests derive from it. op_table(): (name, lowering, effects) per op with kernels per key.
  m.def("op_table", [] {
    std::vector<std::tuple<std::string, std::string, std::string>> table;
#define C10D_FUNC_OP_ROW(name, schema, tags, autograd, lowering, effects) \
  table.emplace_back(#name, #lowering, #effects);
    C10D_FUNC_OPS(C10D_FUNC_OP_ROW)
#undef C10D_FUNC_OP_ROW
    return table;
  });
  // c_shim_declarations(): (op, [C declaration per device]) of the entry points compiled
  // programs call (kernels/c_shims.h), for inductor's custom-op shim config.
  m.def("c_shim_declarations", [] {
    std::vector<std::pair<std::string, std::vector<std::string>>> table;
    for (auto& shim : c10d_func::c_shim_declarations()) {
      table.emplace_back(shim.op, shim.declarations);
    }
    return table;
  });
  m.def("op_names", [] {
    std::vector<std::string> names;
#define C10D_FUNC_OP_NAME(name, ...) names.emplace_back(#name);
    C10D_FUNC_OPS(C10D_FUNC_OP_NAME)
#undef C10D_FUNC_OP_NAME
    return names;
  });
  m.def(
      "settle_at_exit",
      [] {
        const auto report = settle_at_exit(collective_timeout());
        return std::make_pair(report.unwaited, report.abandoned);
      },
      py::call_guard<py::gil_scoped_release>(),
      "Gives collectives issued and never waited C10D_FUNC_TIMEOUT to finish; returns "
      "(unwaited, abandoned).");
  m.def("collective_timeout_seconds", [] { return collective_timeout().count() / 1000.0; });
}
