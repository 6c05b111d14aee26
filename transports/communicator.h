#pragma once
// Communicator: what a kernel needs from a transport. One instance serves one chunk of one
// (device, tag) group. Every call takes dense, contiguous tensors, returns at once, and hands back
// a Completion that is marked done when the output holds its final values (or fails). A transport
// that lacks a reduction or a dtype composes it from what it has, so kernels never branch on the
// transport. A new transport is a new implementation of this class, not an `if` in the kernels.
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>

#include "transports/call_scope.h"
#include "transports/completion.h"
#include "transports/reduce_op.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace c10d_func {

// What a communicator has done, for c10d_func.groups(): kept by the layer that observes every
// collective (runtime/observed_communicator.h), cheap enough to stay on.
struct Activity {
  int64_t collectives = 0;  // issued, messages included
  int64_t bytes = 0;        // per collective, the larger of its input and its output
  double busy_seconds = 0;  // time with at least one collective in flight
  std::optional<std::string> last_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int64_t rank() const = 0;  // index of this process inside the chunk
  virtual int64_t size() const = 0;
  virtual std::string backend_name() const = 0;

  // In place on `buffer`.
  virtual Completion all_reduce(const at::Tensor& buffer, ReduceOp reduce_op) = 0;
  // `output` is size() copies of `input`'s shape, stacked on dim 0.
  virtual Completion all_gather(const at::Tensor& output, const at::Tensor& input) = 0;
  virtual Completion reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                                    ReduceOp reduce_op) = 0;
  // Split sizes count dim-0 rows, one entry per member. A caller that passed none (torch's
  // None) passes dim 0 split evenly: members may mix the two, as torch's backends allow, so a
  // transport chooses its path from what every member shares, never from whether splits were
  // given or are equal on this member.
  virtual Completion all_to_all(const at::Tensor& output, const at::Tensor& input,
                                std::vector<int64_t> output_split_sizes,
                                std::vector<int64_t> input_split_sizes) = 0;
  virtual Completion broadcast(const at::Tensor& buffer, int64_t root) = 0;
  // In place; only `root`'s buffer is defined afterwards (others are left to the caller).
  virtual Completion reduce(const at::Tensor& buffer, int64_t root, ReduceOp reduce_op) = 0;
  // `output` is used on `root` only.
  virtual Completion gather(const at::Tensor& output, const at::Tensor& input, int64_t root) = 0;
  // `input` is read on `root` only.
  virtual Completion scatter(const at::Tensor& output, const at::Tensor& input, int64_t root) = 0;

  // Out of place: every member's `input` reduced into `output`. The transport reads `input`
  // before it returns or keeps a copy of its own, so kernels pass the caller's tensor. The
  // default copies it into `output` and reduces in place.
  virtual Completion all_reduce_into(const at::Tensor& output, const at::Tensor& input,
                                     ReduceOp reduce_op) {
    output.copy_(input);
    return all_reduce(output, reduce_op);
  }
  // Out of place: `root`'s `input` into every member's `output`; `input` as for all_reduce_into.
  virtual Completion broadcast_into(const at::Tensor& output, const at::Tensor& input,
                                    int64_t root) {
    output.copy_(input);
    return broadcast(output, root);
  }

  // False when a call moving `bytes` reads its inputs before it returns (a chunk of one member;
  // a small shm collective): kernels then send the caller's tensor instead of a private copy.
  virtual bool reads_inputs_after_return(int64_t bytes) const { return true; }

  // A private contiguous copy of `input` for a collective that reads it after returning. A
  // transport may serve it from memory it reuses (fresh pages cost a fault each); the default
  // takes large CPU ones from the process's cache of private host memory (host_block_cache.h).
  virtual at::Tensor snapshot(const at::Tensor& input);

  // A fresh contiguous output for a collective of this communicator. The shm transport places
  // large ones in symmetric memory, where the members write them in place; the default takes
  // large CPU ones from the process's cache of private host memory.
  virtual at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options);
  // c10d_func.empty(..., group=): a tensor in symmetric memory where the transport has it (read
  // in place as a collective's input), ordinary memory elsewhere.
  virtual at::Tensor new_symmetric(at::IntArrayRef sizes, const at::TensorOptions& options) {
    return at::empty(sizes, options);
  }
  // Counters of the transport's memory (c10d_func.groups()'s "memory"); the default: those of
  // the process's cache of private host memory, which the defaults above draw from.
  virtual std::vector<std::pair<std::string, int64_t>> memory_stats() const;
  // What it has done, where something observes it (nullopt for a bare transport).
  virtual std::optional<Activity> activity() const { return std::nullopt; }
  // How many collectives `member` has issued on this communicator, where the transport can tell
  // without communicating (shm: the count each member publishes in its control block); nullopt
  // where it cannot. A peer writes it: a caller may rely on it only as far as a wrong value
  // cannot hurt (a message's receiver posts a recv that the channel's timeout then bounds).
  virtual std::optional<uint64_t> issued_by(int64_t member) const { return std::nullopt; }

  // A communicator for this member's part of a partition of all its members, made in one
  // collective call of every member (ncclCommSplit): `color` picks the part, `key` orders
  // members inside it; a negative color takes part in the call but in no part (nullptr).
  // Transports that cannot split return nullptr without communicating.
  virtual std::shared_ptr<Communicator> split(int64_t color, int64_t key) { return nullptr; }

  // The timeout of the collectives issued from now on (torch's set_timeout): a transport that
  // bounds its waits by the timeout it formed with takes the new one; composite communicators
  // pass it to their parts. Transports with no wait of their own (a group of one) ignore it.
  virtual void set_timeout(std::chrono::milliseconds timeout) {}

  // A collective that failed leaves the members out of step; later calls must not reuse it.
  // The first failure is also told to on_failed.
  void mark_failed(const std::string& reason);
  // This communicator's failure, else its failure source's (a wrapper's inner communicator: a
  // CUDA transport fails after the call, from its watchdog, and whoever holds the wrapper must
  // see that at the wait).
  std::optional<std::string> failure() const;
  // failure().has_value() without a lock: the per-call check.
  bool failed() const {
    const Communicator* source = failure_source();
    return marked_failed() || (source != nullptr && source->failed());
  }

 protected:
  // Whether mark_failed was called on this very communicator.
  bool marked_failed() const { return failed_.load(std::memory_order_acquire); }
  // The communicator whose failure is also this one's (a forwarding wrapper's inner one).
  virtual const Communicator* failure_source() const { return nullptr; }
  // The communicator has just failed (once): a transport may tell the members it shares memory
  // with, so that they fail now instead of at their timeout.
  virtual void on_failed(const std::string& reason) {}

 private:
  mutable std::mutex failure_mutex_;
  std::optional<std::string> failure_;
  std::atomic<bool> failed_{false};
};

// The counters of the process's cache of private host memory, as memory_stats() names them.
std::vector<std::pair<std::string, int64_t>> private_host_cache_stats();

}  // namespace c10d_func
