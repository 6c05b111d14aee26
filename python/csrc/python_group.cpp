// PythonGroupCalls: GroupCalls over a Python ProcessGroup's methods; see python_group.h.
#include "python/csrc/python_group.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "transports/c10d/group_communicator.h"

namespace py = pybind11;

namespace c10d_func {

std::shared_ptr<py::object> hold_python(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* held) {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      delete held;
    }
  });
}

namespace {

// A Work written in Python (a dist.Work subclass), kept as torch keeps it: its Python object lives
// until its wait() has run, once, when the output is waited, and goes right after. Its future is
// that wait, deferred (a Python Work need not define get_future, and torch never asks for it).
class HeldPythonWork final : public c10d::Work {
 public:
  HeldPythonWork(c10::intrusive_ptr<c10d::Work> work, std::shared_ptr<py::object> held)
      : work_(std::move(work)), held_(std::move(held)) {}

  bool wait(std::chrono::milliseconds timeout) override {
    std::shared_ptr<py::object> held = std::move(held_);
    bool done = true;
    if (held) {
      done = work_->wait(timeout);  // the Python override, through torch's trampoline
    }
    return done;  // `held` goes here: the Python Work is deleted once its wait returned
  }

  bool isCompleted() override { return held_ == nullptr; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return completed_when_waited([self = c10::intrusive_ptr<HeldPythonWork>::reclaim_copy(this)] {
      self->wait(kNoTimeout);
    });
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::shared_ptr<py::object> held_;
};

// torch's own Work classes are C++ objects; any other dist.Work is a Python subclass.
bool is_written_in_python(const py::object& work) {
  const auto module = py::str(py::type::handle_of(work).attr("__module__")).cast<std::string>();
  return module.rfind("torch._C", 0) != 0;
}

class PythonGroupCalls final : public GroupCalls {
 public:
  PythonGroupCalls(py::object group, py::object caller, PythonGroupTraits traits)
      : group_(hold_python(std::move(group))),
        caller_(hold_python(std::move(caller))),
        traits_(std::move(traits)) {}

  int64_t rank() const override { return traits_.rank; }
  int64_t size() const override { return traits_.size; }
  std::string name() const override { return traits_.name; }
  bool has_reduce() const override { return traits_.has_reduce; }
  bool has_reduce_scatter() const override { return traits_.has_reduce_scatter; }

  Work allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return call("allreduce", tensors, opts);
  }
  Work allgather_base(at::Tensor& output, at::Tensor& input) override {
    return call("allgather_base", output, input);
  }
  Work alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                     std::vector<int64_t>& input_splits) override {
    return call("alltoall_base", output, input, output_splits, input_splits);
  }
  Work broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    return call("broadcast", tensors, opts);
  }
  Work reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return call("reduce", tensors, opts);
  }
  Work gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
              const c10d::GatherOptions& opts) override {
    return call("gather", outputs, inputs, opts);
  }
  Work scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
               const c10d::ScatterOptions& opts) override {
    return call("scatter", outputs, inputs, opts);
  }
  Work reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                           const c10d::ReduceScatterOptions& opts) override {
    return call("reduce_scatter_base", output, input, opts);
  }

 private:
  // Options pass as torch's own Python option objects. The caller hands back a dist.Work: torch's
  // own, or one written in Python, which is held (with the GIL taken to release it) until waited.
  template <typename... Args>
  Work call(const char* collective, const Args&... args) {
    py::gil_scoped_acquire gil;
    py::object work = (*caller_)(*group_, collective, args...);
    auto native = work.cast<c10::intrusive_ptr<c10d::Work>>();
    if (!is_written_in_python(work)) {
      return native;
    }
    return c10::make_intrusive<HeldPythonWork>(std::move(native), hold_python(std::move(work)));
  }

  std::shared_ptr<py::object> group_;
  std::shared_ptr<py::object> caller_;
  PythonGroupTraits traits_;
};

}  // namespace

std::shared_ptr<Communicator> make_python_group_communicator(py::object group, py::object caller,
                                                             PythonGroupTraits traits) {
  return make_group_communicator(
      std::make_unique<PythonGroupCalls>(std::move(group), std::move(caller), std::move(traits)));
}

}  // namespace c10d_func
