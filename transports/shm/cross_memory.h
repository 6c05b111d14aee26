#pragma once
// Cross-memory attach: reading and writing another process's private memory with
// process_vm_readv/writev, so a member of an shm communicator can reach a tensor that does not
// live in symmetric memory (the caller's buffer of an in-place all_reduce through the
// torch.distributed backend, a classic call's input) without first copying it into the pool.
//
// The kernel allows it to processes that may ptrace the target: same user and, where Yama's
// ptrace_scope is 1, a target that named its tracers. Members therefore allow any process of
// their user to attach (prctl(PR_SET_PTRACER_ANY)) when the communicator forms, then each
// probes every peer once by reading a known word from it; the communicator uses cross-memory
// attach only when every member could read every other (C10D_FUNC_SHM_CMA=0 skips all of it:
// no prctl, no probe). A seccomp filter, a container's policy or another pid namespace makes the
// probe fail and the members copy into the pool instead.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace c10d_func::shm {

// False when C10D_FUNC_SHM_CMA is 0 (read once).
bool cross_memory_wanted();

// Lets peers attach (Yama); harmless where Yama is absent.
void allow_peers();

// The address of a word holding kProbeValue in this process, for peers to probe.
uint64_t probe_address();
// True when `pid`'s word at `address` reads as the probe value.
bool probe(pid_t pid, uint64_t address);

// Whole transfers (retried on partial ones); false on any failure.
bool read_from(pid_t pid, void* local, uint64_t remote, size_t bytes);
bool write_to(pid_t pid, uint64_t remote, const void* local, size_t bytes);

}  // namespace c10d_func::shm
