// See torch_flight_recorder.h.
//
// The recorder's templates are instantiated here with hidden visibility: they run on torch's
// instance and must never be picked up by another library in place of torch's own copies.
#include <torch/version.h>

#include "runtime/torch_flight_recorder.h"

// The recorder's layout and methods, as this file uses them, are those of torch 2.11 to 2.14
// (compiled from the header of the torch built against, which is the same in both but for its
// dump's locking); an older torch records nothing of c10d_func's (see docs/observability.md).
// Its header needs nlohmann/json (scripts/install.sh installs it).
#if (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)) && \
    __has_include(<nlohmann/json.hpp>)
#define C10D_FUNC_FLIGHT_RECORDER 1
// What the recorder's header includes keeps its own visibility; only the recorder is hidden.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/TraceUtils.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#pragma GCC visibility push(hidden)
#include <torch/csrc/distributed/c10d/FlightRecorderDetail.hpp>
#pragma GCC visibility pop
#endif

#include <c10/util/ApproximateClock.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>

#ifdef C10D_FUNC_FLIGHT_RECORDER
namespace c10d_func {
namespace {

using Recorder = c10d::FlightRecorder<c10::Event>;

// The mangled name of FlightRecorder<c10::Event>::get().
constexpr std::string_view kGetter = "_ZN4c10d14FlightRecorderIN3c105EventEE3getEv";

// A read-only mapping of a file, unmapped when it goes.
class MappedFile {
 public:
  explicit MappedFile(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return;
    }
    struct stat info {};
    if (::fstat(fd, &info) == 0 && info.st_size > 0) {
      void* data =
          ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (data != MAP_FAILED) {
        data_ = static_cast<const unsigned char*>(data);
        size_ = static_cast<size_t>(info.st_size);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) {
      ::munmap(const_cast<unsigned char*>(data_), size_);
    }
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // `count` objects of T at `offset`, or nullptr where they do not fit in the file.
  template <typename T>
  const T* at(uint64_t offset, uint64_t count = 1) const {
    if (data_ == nullptr || offset > size_ || count > (size_ - offset) / sizeof(T)) {
      return nullptr;
    }
    return reinterpret_cast<const T*>(data_ + offset);
  }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// The value of the symbol `name` in the symbol table (.symtab) of the ELF file at `path`, or 0.
// Every offset and index read from the file is checked against its size before use.
uint64_t symbol_value(const char* path, std::string_view name) {
  MappedFile file(path);
  const auto* header = file.at<Elf64_Ehdr>(0);
  if (header == nullptr || std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
      header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_shentsize != sizeof(Elf64_Shdr)) {
    return 0;
  }
  const auto* sections = file.at<Elf64_Shdr>(header->e_shoff, header->e_shnum);
  if (sections == nullptr) {
    return 0;
  }
  for (size_t s = 0; s < header->e_shnum; ++s) {
    const Elf64_Shdr& table = sections[s];
    if (table.sh_type != SHT_SYMTAB || table.sh_link >= header->e_shnum) {
      continue;
    }
    const Elf64_Shdr& strings = sections[table.sh_link];
    const auto* names = file.at<char>(strings.sh_offset, strings.sh_size);
    const uint64_t count = table.sh_size / sizeof(Elf64_Sym);
    const auto* symbols = file.at<Elf64_Sym>(table.sh_offset, count);
    if (names == nullptr || symbols == nullptr) {
      continue;
    }
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t at = symbols[i].st_name;
      if (at + name.size() >= strings.sh_size || ELF64_ST_TYPE(symbols[i].st_info) != STT_FUNC) {
        continue;
      }
      if (std::memcmp(names + at, name.data(), name.size()) == 0 && names[at + name.size()] == 0) {
        return symbols[i].st_value;
      }
    }
  }
  return 0;
}

// torch's recorder, or nullptr where it cannot be found or does not record.
Recorder* find_recorder() {
  // The library that defines dump_fr_trace holds the recorder dump_fr_trace reads.
  Dl_info where{};
  if (::dladdr(reinterpret_cast<void*>(&c10d::dump_fr_trace), &where) == 0 ||
      where.dli_fname == nullptr || where.dli_fbase == nullptr) {
    return nullptr;
  }
  const uint64_t value = symbol_value(where.dli_fname, kGetter);
  if (value == 0) {
    LOG(WARNING) << "c10d_func: torch's flight recorder is not reachable (" << where.dli_fname
                 << " has no symbol table); c10d_func's collectives are not recorded in it";
    return nullptr;
  }
  auto* get = reinterpret_cast<Recorder* (*)()>(static_cast<char*>(where.dli_fbase) + value);
  Recorder* recorder = get();
  // The instance torch made from the same environment: a recorder that disagrees with it is not
  // the one this header describes.
  const auto expected = static_cast<size_t>(
      c10d::getCvarInt({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, 2000));
  if (recorder == nullptr || recorder->max_entries_ != expected ||
      recorder->enabled_ != (expected > 0)) {
    LOG(WARNING) << "c10d_func: torch's flight recorder does not look as this build expects; "
                    "c10d_func's collectives are not recorded in it";
    return nullptr;
  }
  return recorder->enabled_ ? recorder : nullptr;
}

// Recording costs a few microseconds a collective (a Python stack, a lock, the entry), so it is
// on when the job asks for the recorder, as torch's env vars do: TORCH_FR_BUFFER_SIZE (or the
// older TORCH_NCCL_TRACE_BUFFER_SIZE) set above 0. torch's own default (2000 entries when unset)
// is left to torch's backends: see docs/observability.md.
bool asked_for() {
  for (const char* name : {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}) {
    if (std::getenv(name) != nullptr) {
      return c10d::getCvarInt({name}, 0) > 0;
    }
  }
  return false;
}

Recorder* recorder() {
  static Recorder* const instance = asked_for() ? find_recorder() : nullptr;
  return instance;
}

// Runs `update` on the entry under the recorder's lock, if the ring still holds it.
template <typename Update>
void with_entry(const FlightEntry& entry, Update update) {
  Recorder* r = recorder();
  if (r == nullptr) {
    return;
  }
  std::lock_guard<std::mutex> guard(r->mutex_);
  const auto epoch_start = r->reset_epoch_start_idx_.find(entry.epoch);
  if (epoch_start == r->reset_epoch_start_idx_.end() || r->max_entries_ == 0) {
    return;
  }
  const size_t index = (epoch_start->second + entry.id) % r->max_entries_;
  if (index >= r->entries_.size()) {
    return;
  }
  auto& found = r->entries_[index];
  if (found.id_ == entry.id && found.reset_epoch_ == entry.epoch) {
    update(found);
  }
}

}  // namespace

bool flight_recorder_enabled() {
  return recorder() != nullptr;
}

std::optional<FlightEntry> flight_record(const FlightRecordArgs& args) {
  Recorder* r = recorder();
  if (r == nullptr) {
    return std::nullopt;
  }
  const auto traced =
      r->recordWithResetEnabled(args.pg_id, args.pg_name, args.collective_seq_id, args.p2p_seq_id,
                                args.op_id, args.profiling_name, args.inputs, args.outputs, nullptr,
                                nullptr, args.timeout, args.status, args.p2p);
  if (!traced.id || !traced.reset_epoch) {
    return std::nullopt;
  }
  return FlightEntry{*traced.id, *traced.reset_epoch};
}

void flight_started(const FlightEntry& entry) {
  with_entry(entry, [](Recorder::Entry& found) {
    if (!found.time_discovered_started_) {
      found.time_discovered_started_ = c10::getTime();
    }
  });
}

void flight_completed(const FlightEntry& entry, bool succeeded, double duration_ms) {
  with_entry(entry, [&](Recorder::Entry& found) {
    if (succeeded) {
      const auto now = c10::getTime();
      if (!found.time_discovered_started_) {
        found.time_discovered_started_ = now;
      }
      found.time_discovered_completed_ = now;
      found.duration_ = static_cast<float>(duration_ms);
    }
    found.retired_ = true;
  });
}

void flight_record_group(const std::tuple<std::string, std::string>& pg_name,
                         const std::vector<int64_t>& members) {
  if (Recorder* r = recorder()) {
    r->record_pg_ranks(pg_name, std::vector<uint64_t>(members.begin(), members.end()));
  }
}

void flight_dump_on_failure(int64_t global_rank) {
  static std::atomic<bool> dumped{false};
  if (recorder() == nullptr ||
      !c10d::getCvarBool({"TORCH_FR_DUMP_ON_FAILURE", "TORCH_NCCL_DUMP_ON_TIMEOUT"}, true) ||
      dumped.exchange(true)) {
    return;
  }
  try {
    // Without stack traces: symbolizing Python frames takes the GIL, which the thread that
    // found the failure (a waiter in Python) may hold.
    auto& writer = c10d::DebugInfoWriter::getWriter(static_cast<int>(global_rank));
    writer.write(c10d::dump_fr_trace(/*includeCollectives=*/true, /*includeStackTraces=*/false,
                                     /*onlyActive=*/false));
    LOG(INFO) << "c10d_func: flight recorder dumped to " << writer.getWriterTarget();
  } catch (const std::exception& error) {
    LOG(WARNING) << "c10d_func: could not dump the flight recorder: " << error.what();
  }
}

}  // namespace c10d_func

#else  // torch before 2.11: nothing is recorded

namespace c10d_func {
bool flight_recorder_enabled() {
  return false;
}
std::optional<FlightEntry> flight_record(const FlightRecordArgs&) {
  return std::nullopt;
}
void flight_started(const FlightEntry&) {}
void flight_completed(const FlightEntry&, bool, double) {}
void flight_record_group(const std::tuple<std::string, std::string>&, const std::vector<int64_t>&) {
}
void flight_dump_on_failure(int64_t) {}
}  // namespace c10d_func

#endif
