#pragma once
// Cross-memory attach: reading and writing another process's private memory with
// process_vm_readv/writev, so a member of an shm communicator can reach a tensor that does not
// live in symmetric memory (the caller's buffer of an in-place all_reduce through the
// torch.distributed backend, a classic call's input) without first copying it into the pool.
//
// The kernel allows it to processes that may ptrace the target: the same user and, where Yama's
// ptrace_scope is 1 (Ubuntu's default), only a tracer the target named. A member names its peers
// (AttachPermission) only while they may attach: while they probe it at formation, and while a
// collective that attaches one of its tensors runs; otherwise it names nobody. With one peer the
// permission names that peer's pid (the narrowest Yama offers); with more, Yama takes one tracer
// only, so it is given to every process of the user (PR_SET_PTRACER_ANY) for that window. Where
// Yama is absent (or ptrace_scope is 0) the user's processes may attach anyway and nothing is
// changed; ptrace_scope 2 or 3 forbids it, and the members copy instead. Each member probes every
// peer once at formation, and the communicator attaches only when every member could read every
// other. C10D_FUNC_SHM_CMA=0 skips all of it: no permission, no probe, always a copy. A seccomp
// filter, a container's policy or another pid namespace makes the probe fail: a copy then too.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace c10d_func::shm {

// False when C10D_FUNC_SHM_CMA is 0 or Yama forbids attaching (read once).
bool cross_memory_wanted();

// Yama's ptrace_scope, -1 where Yama is absent (read once).
int yama_scope();
// Whether peers may attach only once this process names them (Yama's ptrace_scope 1).
bool attach_needs_permission();

// While it lives, `peers` may attach to this process (under Yama; a no-op elsewhere). The
// permissions of every live AttachPermission of the process are combined: one pid named alone,
// several as "any process of the user"; the last one gone names nobody again.
class AttachPermission {
 public:
  AttachPermission() = default;
  explicit AttachPermission(const std::vector<pid_t>& peers);
  AttachPermission(AttachPermission&& other) noexcept;
  AttachPermission& operator=(AttachPermission&& other) noexcept;
  AttachPermission(const AttachPermission&) = delete;
  AttachPermission& operator=(const AttachPermission&) = delete;
  ~AttachPermission();

 private:
  void release();
  std::vector<pid_t> peers_;
  bool held_ = false;
};
inline AttachPermission allow_attach(const std::vector<pid_t>& peers) {
  return AttachPermission(peers);
}

// What Yama is told (prctl(PR_SET_PTRACER, ...)) when the live permissions name `permitted`
// (each pid once per permission naming it): 0 (nobody) when empty, the pid when all name one,
// else PR_SET_PTRACER_ANY.
unsigned long ptracer_for(const std::vector<pid_t>& permitted);
extern const unsigned long kAnyTracer;

// The address of a word holding kProbeValue in this process, for peers to probe.
uint64_t probe_address();
// True when `pid`'s word at `address` reads as the probe value.
bool probe(pid_t pid, uint64_t address);

// Whole transfers (retried on partial ones); false on any failure.
bool read_from(pid_t pid, void* local, uint64_t remote, size_t bytes);
bool write_to(pid_t pid, uint64_t remote, const void* local, size_t bytes);

}  // namespace c10d_func::shm
