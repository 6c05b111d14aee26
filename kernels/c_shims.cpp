// The C entry points of every op for compiled programs (see kernels/c_shims.h). Arguments arrive
// as inductor's C++ wrapper writes them for a schema: Tensor as AtenTensorHandle (a borrowed
// at::Tensor*), str as const char*, int[] as pointer + length, SymInt[]? as a pointer to the
// pointer (null for None) + length, Tensor[] as handles + length. A returned Tensor is a new
// handle the caller owns; a returned Tensor[] fills the caller's array of the length it expects
// (the compiled graph knows how many tensors the op returns), checked here.
#include "kernels/c_shims.h"

#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "kernels/c_shim_table.h"
#include "ops/op_handles.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <string>
#include <utility>

namespace c10d_func {
namespace {

at::Tensor& tensor(AtenTensorHandle handle) {
  TORCH_CHECK(handle != nullptr, "c10d_func C shim: a null tensor handle");
  return *reinterpret_cast<at::Tensor*>(handle);
}

std::vector<at::Tensor> tensors(const AtenTensorHandle* handles, int64_t count) {
  TORCH_CHECK(count >= 0 && (count == 0 || handles != nullptr),
              "c10d_func C shim: a tensor list of length ", count, " with no handles");
  std::vector<at::Tensor> list;
  list.reserve(count);
  for (int64_t i = 0; i < count; ++i) list.push_back(tensor(handles[i]));
  return list;
}

at::IntArrayRef ints(const int64_t* values, int64_t count) {
  TORCH_CHECK(count >= 0 && (count == 0 || values != nullptr),
              "c10d_func C shim: an int list of length ", count, " with no values");
  return count == 0 ? at::IntArrayRef() : at::IntArrayRef(values, count);
}

// SymInt[]?: None is a null pointer; the sizes of a compiled graph are plain integers by now.
std::optional<std::vector<c10::SymInt>> optional_sizes(const int64_t** values, int64_t count) {
  if (values == nullptr) return std::nullopt;
  at::IntArrayRef sizes = ints(*values, count);
  return std::vector<c10::SymInt>(sizes.begin(), sizes.end());
}

at::OptionalSymIntArrayRef view(const std::optional<std::vector<c10::SymInt>>& sizes) {
  return sizes ? at::OptionalSymIntArrayRef(*sizes) : at::OptionalSymIntArrayRef(std::nullopt);
}

std::vector<std::string> strings(const char** values, int64_t count) {
  TORCH_CHECK(count >= 0 && (count == 0 || values != nullptr),
              "c10d_func C shim: a string list of length ", count, " with no values");
  return std::vector<std::string>(values, values + count);
}

AtenTensorHandle new_handle(at::Tensor result) {
  return reinterpret_cast<AtenTensorHandle>(new at::Tensor(std::move(result)));
}

void return_list(const char* op, std::vector<at::Tensor> results, AtenTensorHandle* out,
                 int64_t expected) {
  TORCH_CHECK(static_cast<int64_t>(results.size()) == expected, "c10d_func.", op,
              " (C shim): returned ", results.size(),
              " tensors where the compiled program expects ", expected);
  for (size_t i = 0; i < results.size(); ++i) out[i] = new_handle(std::move(results[i]));
}

// Each op's entry: its body, exceptions turned into torch's error state and code.
#define C10D_FUNC_C_SHIM_ENTRY(op, parameters, arguments, ...) \
  AOTITorchError op##_entry parameters {                       \
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({__VA_ARGS__}); \
  }
C10D_FUNC_C_SHIM_TABLE(C10D_FUNC_C_SHIM_ENTRY)
#undef C10D_FUNC_C_SHIM_ENTRY

// The exported symbols live in libc10d_func_c_shims, a library of their own that depends on
// nothing: generated code resolves them from the process's global scope, and a library loaded
// global makes its dependencies global too. Made global, libc10d_func would take torch's and
// CUDA's libraries with it, after which torch's own functional collectives over Gloo hung in
// compiled programs (measured: benchmarks/compiled_calls.py). Loaded next to this library when
// it loads, so Python and C++ programs alike have the entry points.
bool install_entry_points() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&install_entry_points), &self) == 0 || !self.dli_fname) {
    return false;
  }
  std::string path(self.dli_fname);
  path = path.substr(0, path.rfind('/') + 1) + "libc10d_func_c_shims.so";
  void* exports = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (exports == nullptr) return false;
  auto install = reinterpret_cast<decltype(&c10d_func_install_c_shims)>(
      dlsym(exports, "c10d_func_install_c_shims"));
  CShimEntries entries;
#define C10D_FUNC_C_SHIM_SET(op, ...) entries.op = &op##_entry;
  C10D_FUNC_C_SHIM_TABLE(C10D_FUNC_C_SHIM_SET)
#undef C10D_FUNC_C_SHIM_SET
  return install != nullptr && install(&entries, sizeof(entries)) == 0;
}

const bool entry_points_installed = install_entry_points();

}  // namespace

std::vector<CShimDeclaration> c_shim_declarations() {
  TORCH_CHECK(entry_points_installed,
              "c10d_func: libc10d_func_c_shims.so, the C entry points of compiled programs, was "
              "not found next to libc10d_func or could not be loaded; rebuild the package, or set "
              "C10D_FUNC_C_SHIMS=0 to compile without direct calls");
  std::vector<CShimDeclaration> table;
#define C10D_FUNC_DECLARE_C_SHIM(op, parameters, ...)                           \
  table.push_back({#op,                                                         \
                   {"AOTITorchError aoti_torch_cpu_c10d_func_" #op #parameters, \
                    "AOTITorchError aoti_torch_cuda_c10d_func_" #op #parameters}});
  C10D_FUNC_C_SHIM_TABLE(C10D_FUNC_DECLARE_C_SHIM)
#undef C10D_FUNC_DECLARE_C_SHIM
  return table;
}

}  // namespace c10d_func
