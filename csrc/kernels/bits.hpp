// Small bit helpers shared by the kernels (internal header).
#pragma once

#include <cstdint>

#include "portable.hpp"

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define ACES_FAST_SSE2 1
#endif

namespace aces_fast {
namespace bits {

inline int popcount64(uint64_t x) { return portable::popcount64(x); }

// Pass bits of len <= 64 bytes: bit k set iff p[k] != 0. Reads exactly len bytes.
inline uint64_t pass_bits(const uint8_t* p, int64_t len) {
  uint64_t out = 0;
  int64_t k = 0;
#ifdef ACES_FAST_SSE2
  const __m128i zero = _mm_setzero_si128();
  for (; k + 16 <= len; k += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k));
    const uint32_t z = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero)));
    out |= static_cast<uint64_t>(~z & 0xFFFFu) << k;
  }
#endif
  for (; k < len; ++k) out |= static_cast<uint64_t>(p[k] != 0) << k;
  return out;
}

// splitmix64 finalizer: a bijective mix with full avalanche (row hashing).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

// Number of nonzero bytes among p[0..m).
inline int64_t count_passes(const uint8_t* p, int64_t m) {
  int64_t c = 0;
  for (int64_t j = 0; j < m; j += 64) {
    const int64_t len = m - j < 64 ? m - j : 64;
    c += popcount64(pass_bits(p + j, len));
  }
  return c;
}

}  // namespace bits
}  // namespace aces_fast
