// See stream_copy.h.
#include "transports/shm/stream_copy.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace c10d_func::shm {
namespace {

size_t stream_from_bytes() {
  if (const char* value = std::getenv("C10D_FUNC_SHM_STREAM_BYTES"); value && *value) {
    return static_cast<size_t>(std::strtoull(value, nullptr, 10));
  }
  const long cache = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return cache > 0 ? static_cast<size_t>(cache) / 2 : size_t{16} << 20;
}

}  // namespace

bool streaming(size_t bytes) {
  static const size_t from = stream_from_bytes();
  return bytes >= from;
}

void stream_copy(void* dst, const void* src, size_t bytes, bool stream) {
#if defined(__x86_64__)
  if (stream && bytes >= 256) {
    auto* out = static_cast<char*>(dst);
    const auto* in = static_cast<const char*>(src);
    const size_t head = (16 - reinterpret_cast<uintptr_t>(out) % 16) % 16;
    std::memcpy(out, in, head);
    out += head;
    in += head;
    bytes -= head;
    const size_t blocks = bytes / 64;
    for (size_t i = 0; i < blocks; ++i) {  // one cache line per step (SSE2: every x86-64 CPU)
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
      in += 64;
      out += 64;
    }
    std::memcpy(out, in, bytes % 64);
    // Streaming stores are weakly ordered: make them visible before the barrier that publishes
    // them (the barrier's release store orders ordinary stores only).
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void stream_copy_outside(void* dst, const void* src, size_t bytes, size_t skip_begin,
                         size_t skip_end, bool stream) {
  stream_copy(dst, src, skip_begin, stream);
  stream_copy(static_cast<char*>(dst) + skip_end, static_cast<const char*>(src) + skip_end,
              bytes - skip_end, stream);
}

}  // namespace c10d_func::shm
