#pragma once
// The memory the shm transport's members share, and how they wait on each other in it.
//
// SharedSegment: one POSIX shared-memory object per communicator, named from a random token,
// mapped by every member and unlinked as soon as all have mapped it (so nothing stays in
// /dev/shm, whatever happens to the processes afterwards).
//
// MemberControl: two cache lines per member in the segment's header: the last barrier step the
// member reached, a futex word bumped on each arrival (sleepers wait on it), its pid (so a
// waiter can tell a dead member from a slow one) and the collective it is in.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace c10d_func::shm {

// Which host (and /dev/shm) this process runs on: hostname, boot id, and the IPC and mount
// namespaces. Processes with the same identity can share a segment. C10D_FUNC_TEST_HOST_ID
// replaces it: a test-only override that fakes several hosts on one machine.
std::string host_identity();

// The pid namespace of this process: a recorded pid is only checked for liveness by members of
// the same namespace.
uint64_t pid_namespace();

constexpr int64_t kUnplaced = -1;
constexpr int64_t kAttached = -2;

struct alignas(64) MemberControl {
  std::atomic<uint64_t> arrived{0};  // the last barrier step this member reached
  // Collectives this member has issued (run inside the call or queued to its progress thread):
  // a member runs a small one inside the call only once every peer has issued it too.
  std::atomic<uint64_t> issued{0};
  std::atomic<uint32_t> wake{0};      // futex word: bumped on every arrival
  std::atomic<uint32_t> sleepers{0};  // waiters (about to be) asleep on `wake`
  // Per collective, by the parity of its number (members are at most one collective apart): what
  // the member announced it runs, and a small number it exchanges (all_to_all's rounds).
  std::atomic<uint64_t> collective[2] = {0, 0};
  std::atomic<int64_t> value[2] = {0, 0};
  // Direct collectives: where this member's input and output lie, published before the first
  // barrier: an offset in the segment, kUnplaced, or kAttached (in its private memory at
  // *_address, reached by cross-memory attach).
  std::atomic<int64_t> exposed_input{-1};
  std::atomic<int64_t> exposed_output{-1};
  std::atomic<uint64_t> input_address{0};
  std::atomic<uint64_t> output_address{0};
  // Set once this member's communicator failed, after `failure` (its reason, cut to fit): peers
  // waiting on this member fail at once, with the reason, instead of at their timeout.
  std::atomic<uint32_t> failed{0};
  char failure[512] = {};
  int32_t pid = 0;
  uint64_t pid_ns = 0;
  uint64_t probe_address = 0;  // a word peers read once to learn whether cross-memory attach works
};

class SharedSegment {
 public:
  // Creates `name` (O_EXCL) of `bytes`, zero-filled, and maps it.
  static SharedSegment create(const std::string& name, size_t bytes);
  // Maps an existing `name`, whatever its size.
  static SharedSegment open(const std::string& name);
  // Removes the name (not the mapping); a missing name is not an error.
  static void unlink(const std::string& name);

  SharedSegment() = default;
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  char* base() const { return static_cast<char*>(base_); }
  size_t size() const { return size_; }

  // Gives [offset, offset + bytes) real pages (fallocate): false when /dev/shm has no room, so
  // touching the range can never raise SIGBUS. Then pre-faults them in this mapping.
  bool reserve(size_t offset, size_t bytes) const;
  // Returns the pages of [offset, offset + bytes) to the kernel (every member's mapping of them
  // reads zeros afterwards).
  void give_back(size_t offset, size_t bytes) const;

 private:
  SharedSegment(void* base, size_t size, int fd) : base_(base), size_(size), fd_(fd) {}
  void* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // kept open for reserve/give_back
};

// Sleeps on `word` while it still holds `expected`, for at most `timeout` (futex, shared between
// processes). Spurious returns are allowed.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds timeout);
void futex_wake_all(std::atomic<uint32_t>& word);

// True when the process `pid` (of pid namespace `pid_ns`, as a member recorded them) is known
// to be gone.
bool member_is_dead(int32_t pid, uint64_t pid_ns);

}  // namespace c10d_func::shm
