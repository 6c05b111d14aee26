#pragma once
// torch's own flight recorder (torch/csrc/distributed/c10d/FlightRecorder.hpp), the ring buffer
// that _dump_fr_trace() and the dumps on failure read. torch keeps the one instance its backends
// record into behind a function it does not export (FlightRecorder<c10::Event>::get()); a
// custom backend has only the ProcessGroup hooks (hooks/FlightRecorderHook.hpp), whose entries
// torch 2.14's own analyzer rejects ("allreduce is not a supported operation") and which see
// nothing of calls that never pass a ProcessGroup. So this file finds the instance itself: the
// address of that function is read from libtorch's symbol table, and the recorder's methods,
// templates in torch's header, run on it as torch's would. docs/observability.md names the hook
// torch would need instead (an exported accessor).
//
// Without the symbol table (a stripped libtorch) or with TORCH_FR_BUFFER_SIZE=0, every call here
// is a no-op: recording is best effort and never fails a collective.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace c10d {
struct ProcessGroupStatus;
}

namespace c10d_func {

// One entry of the recorder: its id and the epoch it was written in (an entry is found again by
// both, and only while the ring has not overwritten it).
struct FlightEntry {
  size_t id = 0;
  size_t epoch = 0;
};

// Whether torch's recorder was found and records (TORCH_FR_BUFFER_SIZE > 0). Cheap after the
// first call.
bool flight_recorder_enabled();

struct FlightRecordArgs {
  size_t pg_id = 0;
  std::tuple<std::string, std::string> pg_name;  // (group name, description)
  size_t collective_seq_id = 0;
  size_t p2p_seq_id = 0;
  size_t op_id = 0;
  std::string profiling_name;  // "<transport>:<op>", as the analyzer parses it
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> outputs;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<c10d::ProcessGroupStatus> status;
  bool p2p = false;
};

// A new entry in state "scheduled"; nullopt where the recorder is off.
std::optional<FlightEntry> flight_record(const FlightRecordArgs& args);

// The entry's collective started (state "started").
void flight_started(const FlightEntry& entry);

// The entry's collective ended (state "completed" when it succeeded, with its duration; a failed
// one keeps the state it reached) and is retired.
void flight_completed(const FlightEntry& entry, bool succeeded, double duration_ms);

// The group's global ranks, shown in the dump's pg_config and used by the analyzer.
void flight_record_group(const std::tuple<std::string, std::string>& pg_name,
                         const std::vector<int64_t>& members);

// Writes torch's dump (pickle, as _dump_fr_trace() returns it) through torch's DebugInfoWriter:
// TORCH_FR_DUMP_TEMP_FILE (or TORCH_NCCL_DEBUG_INFO_TEMP_FILE) followed by `global_rank`. Once
// per process, where the recorder records and TORCH_FR_DUMP_ON_FAILURE (or
// TORCH_NCCL_DUMP_ON_TIMEOUT) is not 0. Never throws.
void flight_dump_on_failure(int64_t global_rank);

}  // namespace c10d_func
