#pragma once
// What a background thread (a message channel's, a transport's) must not be the last to let go
// of: tensors, and Futures whose value holds tensors. Letting go of a tensor that Python also
// holds takes the GIL (torch's PyObject preservation). Once the caller has woken and gone on to
// shut Python down, a thread taking the GIL is ended by Python in the middle of a destructor,
// which aborts the process ("terminate called without an active exception"). Such a thread
// parks its last references here instead; the next caller of the library lets go of them on its
// own thread, and what is parked at exit is never let go of (the process is ending).
#include <ATen/core/ivalue.h>

namespace c10d_func {

// Keeps `held` until the next release_parked() on a caller's thread.
void park_release(c10::IValue held);

// On a caller's thread (one that may take the GIL): lets go of everything parked so far.
void release_parked();

}  // namespace c10d_func
