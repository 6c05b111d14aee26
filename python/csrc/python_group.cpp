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
  // Options pass as torch's own Python option objects. The caller hands back a native Work (it
  // wraps a Python one), so nothing below reaches into Python again without the GIL.
  template <typename... Args>
  Work call(const char* collective, const Args&... args) {
    py::gil_scoped_acquire gil;
    py::object work = (*caller_)(*group_, collective, args...);
    return work.cast<c10::intrusive_ptr<c10d::Work>>();
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
