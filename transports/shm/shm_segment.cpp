// See shm_segment.h.
#include "transports/shm/shm_segment.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace c10d_func::shm {
namespace {

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

uint64_t namespace_inode(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0 ? static_cast<uint64_t>(info.st_ino) : 0;
}

}  // namespace

std::string host_identity() {
  if (const char* fake = std::getenv("C10D_FUNC_TEST_HOST_ID"); fake && *fake) {
    return std::string("test:") + fake;
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::ostringstream id;
  id << host << '|' << read_first_line("/proc/sys/kernel/random/boot_id") << '|'
     << namespace_inode("/proc/self/ns/ipc") << '|' << namespace_inode("/proc/self/ns/mnt");
  return id.str();
}

uint64_t pid_namespace() {
  return namespace_inode("/proc/self/ns/pid");
}

SharedSegment SharedSegment::create(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  TORCH_CHECK(fd >= 0, "c10d_func shm: shm_open(", name, ") failed: ", std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    TORCH_CHECK(false, "c10d_func shm: could not size ", name, " to ", bytes,
                " bytes: ", std::strerror(error),
                " (is /dev/shm large enough? C10D_FUNC_SHM_CHUNK_BYTES ", "sets the size)");
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  if (base == MAP_FAILED) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    TORCH_CHECK(false, "c10d_func shm: mmap of ", name, " failed: ", std::strerror(error));
  }
  return SharedSegment(base, bytes, fd);
}

SharedSegment SharedSegment::open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  TORCH_CHECK(fd >= 0, "c10d_func shm: shm_open(", name, ") failed: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    TORCH_CHECK(false, "c10d_func shm: fstat of ", name, " failed: ", std::strerror(error));
  }
  // Only a segment this user made for itself alone (create's 0600) is ever mapped: one of
  // another user, or open to others, was not made by a member of this group.
  if (info.st_uid != ::geteuid() || (info.st_mode & 077) != 0 || info.st_size <= 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(info.st_mode & 0777));
    TORCH_CHECK(false, "c10d_func shm: refusing segment ", name, ": owner uid ", info.st_uid,
                ", mode ", mode, ", ", info.st_size,
                " bytes; a member's segment is this user's, mode 600, and not empty");
  }
  const auto bytes = static_cast<size_t>(info.st_size);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  if (base == MAP_FAILED) {
    ::close(fd);
    TORCH_CHECK(false, "c10d_func shm: mmap of ", name, " failed: ", std::strerror(error));
  }
  return SharedSegment(base, bytes, fd);
}

void SharedSegment::unlink(const std::string& name) {
  ::shm_unlink(name.c_str());  // ENOENT: another member removed it already
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : base_(other.base_), size_(other.size_), fd_(other.fd_) {
  other.base_ = nullptr;
  other.size_ = 0;
  other.fd_ = -1;
}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    if (base_) {
      ::munmap(base_, size_);
    }
    if (fd_ >= 0) {
      ::close(fd_);
    }
    base_ = other.base_;
    size_ = other.size_;
    fd_ = other.fd_;
    other.base_ = nullptr;
    other.size_ = 0;
    other.fd_ = -1;
  }
  return *this;
}

SharedSegment::~SharedSegment() {
  if (base_) {
    ::munmap(base_, size_);
  }
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

bool SharedSegment::reserve(size_t offset, size_t bytes) const {
  if (::fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(bytes)) != 0) {
    return false;
  }
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  // Kernels before 5.14 refuse it (EINVAL): the pages then fault once on first touch instead.
  (void)::madvise(base() + offset, bytes, MADV_POPULATE_WRITE);
  return true;
}

void SharedSegment::give_back(size_t offset, size_t bytes) const {
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                    static_cast<off_t>(bytes));
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds timeout) {
  struct timespec span {};
  span.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  span.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &span, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

bool member_is_dead(int32_t pid, uint64_t pid_ns) {
  if (pid <= 0 || pid_ns != pid_namespace()) {
    return false;  // unknown, or a pid we cannot interpret: only the timeout decides
  }
  if (::kill(pid, 0) != 0) {
    return errno == ESRCH;
  }
  // A killed process stays a zombie until its parent reaps it: it has exited all the same.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

}  // namespace c10d_func::shm
