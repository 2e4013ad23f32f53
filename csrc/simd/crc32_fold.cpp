// The CRC-32 fold of io/codecs.cpp (crc32_fold.hpp): SSE4.1 and PCLMULQDQ
// intrinsics, x86 only (part of the AVX2 level, see dispatch.cpp).
#include "simd/crc32_fold.hpp"

#if ACES_FAST_X86_SIMD
#include <immintrin.h>

namespace aces_fast {
namespace simd {

#define ACES_FAST_TARGET_CLMUL __attribute__((target("pclmul,sse4.1")))

namespace {

// x's two halves multiplied by k's (carry-less), added to next
ACES_FAST_TARGET_CLMUL inline __m128i fold(__m128i x, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

ACES_FAST_TARGET_CLMUL inline __m128i load(const uint8_t* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}

}  // namespace

ACES_FAST_TARGET_CLMUL uint32_t crc32_fold(const uint8_t* p, size_t n, uint32_t crc) {
  const __m128i k64 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);      // folds over 64 bytes
  const __m128i k16 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);      // over 16 bytes
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);                  // 64 -> 32 bits
  const __m128i barrett = _mm_set_epi64x(0x01f7011641, 0x01db710641);  // mu, P(x)
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i x[4] = {load(p), load(p + 16), load(p + 32), load(p + 48)};
  x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128(static_cast<int>(crc)));
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64)
    for (int l = 0; l < 4; ++l) x[l] = fold(x[l], k64, load(p + 16 * l));
  __m128i acc = fold(x[0], k16, x[1]);
  acc = fold(acc, k16, x[2]);
  acc = fold(acc, k16, x[3]);
  for (; n >= 16; p += 16, n -= 16) acc = fold(acc, k16, load(p));
  // 128 -> 64 bits
  acc = _mm_xor_si128(_mm_srli_si128(acc, 8), _mm_clmulepi64_si128(acc, k16, 0x10));
  // 64 -> 32 bits
  const __m128i top = _mm_srli_si128(acc, 4);
  acc = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(acc, low32), k5, 0x00), top);
  // Barrett reduction
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(acc, low32), barrett, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(acc, t), 1));
}

}  // namespace simd
}  // namespace aces_fast

#endif
