// See cross_memory.h.
#include "transports/shm/cross_memory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

#include <sys/prctl.h>
#include <sys/uio.h>

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif

namespace c10d_func::shm {
namespace {

constexpr uint64_t kProbeValue = 0x63726f73736d656dULL;  // "crossmem"
volatile uint64_t probe_word = kProbeValue;

// The kernel moves at most this much per call before a partial return is likely.
constexpr size_t kMaxTransfer = size_t{1} << 30;

}  // namespace

int yama_scope() {
  static const int scope = [] {
    std::ifstream file("/proc/sys/kernel/yama/ptrace_scope");
    int value = -1;
    return (file >> value) ? value : -1;
  }();
  return scope;
}

bool attach_needs_permission() {
  return yama_scope() == 1;
}

bool cross_memory_wanted() {
  static const bool wanted = [] {
    const char* value = std::getenv("C10D_FUNC_SHM_CMA");
    // ptrace_scope 2 (admin only) or 3 (never): no member could attach to another.
    return (value == nullptr || std::strcmp(value, "0") != 0) && yama_scope() < 2;
  }();
  return wanted;
}

namespace {

// The pids every live AttachPermission names (a pid once per permission naming it).
std::mutex permission_mutex;
std::multiset<pid_t> permitted;

// Tells Yama what `permitted` now allows; the caller holds permission_mutex.
void apply_permissions() {
  (void)::prctl(PR_SET_PTRACER, ptracer_for(std::vector<pid_t>(permitted.begin(), permitted.end())),
                0, 0, 0);
}

}  // namespace

const unsigned long kAnyTracer = PR_SET_PTRACER_ANY;

unsigned long ptracer_for(const std::vector<pid_t>& permitted) {
  if (permitted.empty()) {
    return 0;  // nobody
  }
  for (const pid_t pid : permitted) {
    if (pid != permitted.front()) {
      return PR_SET_PTRACER_ANY;  // Yama records one tracer: several peers need "any"
    }
  }
  return static_cast<unsigned long>(permitted.front());
}

AttachPermission::AttachPermission(const std::vector<pid_t>& peers) : peers_(peers) {
  if (!attach_needs_permission() || peers_.empty()) {
    return;
  }
  std::lock_guard<std::mutex> lock(permission_mutex);
  permitted.insert(peers_.begin(), peers_.end());
  held_ = true;
  apply_permissions();
}

AttachPermission::AttachPermission(AttachPermission&& other) noexcept
    : peers_(std::move(other.peers_)), held_(other.held_) {
  other.held_ = false;
}

AttachPermission& AttachPermission::operator=(AttachPermission&& other) noexcept {
  if (this != &other) {
    release();
    peers_ = std::move(other.peers_);
    held_ = other.held_;
    other.held_ = false;
  }
  return *this;
}

AttachPermission::~AttachPermission() {
  release();
}

void AttachPermission::release() {
  if (!held_) {
    return;
  }
  std::lock_guard<std::mutex> lock(permission_mutex);
  for (const pid_t pid : peers_) {
    permitted.erase(permitted.find(pid));
  }
  held_ = false;
  apply_permissions();
}

uint64_t probe_address() {
  return reinterpret_cast<uint64_t>(&probe_word);
}

bool probe(pid_t pid, uint64_t address) {
  uint64_t value = 0;
  return read_from(pid, &value, address, sizeof(value)) && value == kProbeValue;
}

bool read_from(pid_t pid, void* local, uint64_t remote, size_t bytes) {
  auto* to = static_cast<char*>(local);
  while (bytes > 0) {
    const size_t step = bytes < kMaxTransfer ? bytes : kMaxTransfer;
    struct iovec mine = {to, step};
    struct iovec theirs = {reinterpret_cast<void*>(remote), step};
    const ssize_t moved = ::process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (moved <= 0) {
      return false;
    }
    to += moved;
    remote += static_cast<uint64_t>(moved);
    bytes -= static_cast<size_t>(moved);
  }
  return true;
}

bool write_to(pid_t pid, uint64_t remote, const void* local, size_t bytes) {
  const auto* from = static_cast<const char*>(local);
  while (bytes > 0) {
    const size_t step = bytes < kMaxTransfer ? bytes : kMaxTransfer;
    struct iovec mine = {const_cast<char*>(from), step};
    struct iovec theirs = {reinterpret_cast<void*>(remote), step};
    const ssize_t moved = ::process_vm_writev(pid, &mine, 1, &theirs, 1, 0);
    if (moved <= 0) {
      return false;
    }
    from += moved;
    remote += static_cast<uint64_t>(moved);
    bytes -= static_cast<size_t>(moved);
  }
  return true;
}

}  // namespace c10d_func::shm
