#pragma once
// Copies for data that will not be read again soon by this core: the pieces of a collective's
// result written into every member's output, the snapshots of queued collectives' inputs.
// Non-temporal stores write whole cache lines to memory without first reading them (an ordinary
// store to memory outside the cache reads each line before writing it), so a large copy moves
// two bytes per byte instead of three. A collective whose data fits in the last-level cache is
// better served by ordinary stores: its reader finds the data in cache.
#include <cstddef>

namespace c10d_func::shm {

// True when a collective writing `bytes` on this member should stream: from half the last-level
// cache (C10D_FUNC_SHM_STREAM_BYTES overrides; read once).
bool streaming(size_t bytes);

// memcpy, with non-temporal stores when `stream` is true.
void stream_copy(void* dst, const void* src, size_t bytes, bool stream);

// stream_copy of all of `bytes` but [skip_begin, skip_end): the part another step handles (an
// all_reduce member's own slice).
void stream_copy_outside(void* dst, const void* src, size_t bytes, size_t skip_begin,
                         size_t skip_end, bool stream);

}  // namespace c10d_func::shm
