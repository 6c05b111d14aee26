#pragma once
// Completion: how a transport says a collective is done (a torch Future, so torch's Work and
// wait_tensor wait it), and the helpers every transport uses to make, chain and wait them:
// deferred waits (a collective run by the thread that waits it), finishing steps after a
// collective, and the hand-off from a progress thread.
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <thread>

namespace c10d_func {

using Completion = c10::intrusive_ptr<c10::ivalue::Future>;

// A Completion that is already done; used when there is nothing to send.
Completion completed();

// A Completion that finishes with `upstream` but holds no value: a backend's future carries the
// output tensors as its value, and whatever keeps such a future keeps the outputs alive. On a
// device, waiting it orders the waiter as waiting `upstream` would.
Completion detached(const Completion& upstream);

// Runs `finish` once `upstream` succeeds and completes the result after it; an upstream error
// passes through untouched and `finish` is skipped. `written` is the tensor `finish` writes: on a
// device Future, the result's completion event is recorded for its storage (after `finish`'s
// work on the callback's stream), so waiting on the result orders the waiter after it.
// `also_used` names every other tensor `finish` reads or writes. On a device, `finish` queues its
// work on the callback's stream and may drop the last reference to a staging buffer before that
// work ran; `written` and `also_used` are marked used by that stream, so their memory is not
// handed out again until it did.
Completion then_run(const Completion& upstream, const at::Tensor& written,
                    const std::vector<at::Tensor>& also_used, std::function<void()> finish);

// A Completion that finishes when every one of `completions` has; the first error wins. On a
// device, waiting it orders the waiter after every part: parts may end on different streams (a
// finishing step runs on a stream of its own), so the last part's events do not cover the others.
Completion when_all(const std::vector<Completion>& completions);

// A Completion that only a waiter can finish. A ProcessGroup written in Python may hand back a
// Work with no future, whose collective is done only once its wait() is called; torch calls that
// wait from wait_tensor, once, and drops the Work right after, so programs that count a Work's
// waits (or its deletion) see it then. `wait` runs at most once, in the first thread that waits
// this Completion or one chained after it (then_run, detached, chain_deferred_wait); it
// completes the Completion, or fails it with what it threw.
Completion completed_when_waited(std::function<void()> wait);

// Makes the first thread that waits `completion` (or one chained after it) run `help` before it
// blocks. Unlike completed_when_waited, `help` need not complete it: a transport whose progress
// thread would run the collective may let the waiter run it instead, when nothing is ahead of it
// (the waiter would block anyway; the two hand-offs between threads cost a small collective more
// than its bytes). `help` must not throw; its outcome is told through `completion`.
// `nudge`, when given, runs instead when the Completion is handed out as a Future that may be
// waited directly, past the help (expose_completion): a transport that leaves a collective to its
// waiter (TaskQueue's quiet rests) must then let its progress thread run it.
void help_when_waited(const Completion& completion, std::function<void()> help,
                      std::function<void()> nudge = {});

// Before `completion` is handed out as a Future that torch or a user may wait directly (a Work's
// getFuture: DDP's communication hooks wait it so, or chain callbacks on it): runs the nudge
// registered with its help, if any, so that it completes with nobody calling wait_completion.
void expose_completion(const Completion& completion);

// Makes waiting `downstream` run the deferred wait behind `upstream`, if there is one: for a
// Completion derived from another outside then_run/detached.
void chain_deferred_wait(const Completion& upstream, const Completion& downstream);

// Runs the deferred wait behind `completion`, if there is one and it has not run: what a wait
// does before blocking, for callers that poll instead.
void run_deferred_wait(const Completion& completion);

// Waits `completion`: runs the deferred wait behind it, if any, then blocks (CPU) or makes the
// current stream wait (CUDA). Every wait of a Completion goes through here.
void wait_completion(const Completion& completion);

// For transports with a progress thread: runs `work`, drops it (and the tensors it holds), then
// completes `done` with its outcome (a c10::Error becomes a plain error without its backtrace).
// Dropping first matters: releasing a tensor that Python still references takes the GIL, which
// a thread must not try to take once the interpreter, told the work is done, may be exiting.
void run_then_complete(std::function<void()>& work, const Completion& done);

// Ends a progress thread that was told to stop: joins it, or detaches it when the owner is being
// destroyed on that very thread (its last task released the last reference).
void end_progress_thread(std::thread& worker);

}  // namespace c10d_func
