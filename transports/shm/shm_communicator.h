#pragma once
// The shm transport: collectives between the processes of one host through one shared-memory
// segment per communicator.
//
// ShmCommunicator (shm_communicator.cpp): every collective of the library between the processes of
// one host, through one shared-memory segment per communicator (transports/shm/shm_segment.h).
//
// Segment: a header, one MemberControl per member, then two buffer sets, each with one slot per
// member and one result slot, all of C10D_FUNC_SHM_CHUNK_BYTES (4 MiB by default). A message
// larger than a slot streams through in chunks. Consecutive chunks (of one op or the next) use
// the two sets in turn, so a member may write the next chunk while the others still read the
// previous one; the barrier of chunk k+1 is what frees the set of chunk k.
//
// Each chunk: every member copies its part into its slot, all meet at a barrier, then each reads
// what it needs from the others' slots. Reductions of small chunks are done whole by every
// member (one barrier); of large chunks, member i reduces the i-th slice into the result slot,
// and after a second barrier everyone copies the result out (a reduce-scatter then an
// all-gather: each member reduces 1/n of the data). Reductions run ATen's vectorised kernels
// over views of the slots, with the dtype staging every transport shares.
//
// Large messages (over 256 KiB) and every all_to_all take the direct path instead
// (shm_direct.h): members read (or write) each other's tensors in place in symmetric memory, the
// segment's per-member regions, from which the outputs of large collectives and the snapshots of
// queued collectives' inputs are allocated (symmetric_pool.h). The slots serve small messages, and
// large ones when a member's pool is full. Barriers, announcements and failures: shm_members.h.
//
// Progress: collectives run in issue order. One that is small (<= 256 KiB) runs inside the call,
// and is complete when the op returns, when nothing is queued and every peer has issued it too
// (each member counts what it issued in its control block); others are queued (task_queue.h)
// and the op returns at once: the progress thread runs them, or the thread that waits one when
// it is next. A large all_to_all, and the root of a large broadcast, whose peers have all issued
// it run inside the call the part that reads the input and queue the rest (submit_split), and a
// large out-of-place all_reduce of a private input whose peers have all issued it runs inside the
// call: the input then needs no copy (a queued collective reads a copy of a functional op's
// input, whose caller may write it once the op returns; see kept). A caller thus never blocks on a
// peer that has not issued the collective: that peer may be blocked itself, in a call on another
// tag that waits for this member's next call, and a queued collective completes whatever the
// callers do. The ordering rule, as NCCL has one: every member must issue the collectives of one
// communicator (tag and chunk) in the same order; across tags, any order (forming a communicator,
// on a tag's first call, does meet the peers inside the call: runtime/group_formation.cpp).
#include "transports/communicator.h"
#include "transports/rendezvous.h"

#include <memory>
#include <string>
#include <vector>

namespace c10d_func {

// Forms the communicator of `rendezvous`'s chunk; every member must be on this host (the "shm"
// transport raises naming the members that are not).
std::shared_ptr<Communicator> make_shm_communicator(const Rendezvous& rendezvous);

// Forms the communicator of a chunk known to be on one host (a part of the hierarchy, the "auto"
// transport's chunk of one host), with no check.
std::shared_ptr<Communicator> form_shm_communicator(const Rendezvous& rendezvous);

// Every member's host identity (shm_segment.h: boot id and IPC namespace), in member order:
// members with the same one can share memory.
std::vector<std::string> exchange_host_identities(const Rendezvous& rendezvous);

}  // namespace c10d_func
