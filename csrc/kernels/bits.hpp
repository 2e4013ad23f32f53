// Small bit helpers shared by the kernels (internal header).
#pragma once

#include <cstdint>
#include <cstring>

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

// Unpack one row of m columns packed big-endian (numpy.packbits' default: column
// 8b + i is bit 7 - i of byte b; ceil(m / 8) bytes) into m bytes of 0/1 at out.
// Returns false when a padding bit after column m is set (then out is filled,
// but the row is not what a reader of the layout meant).
inline bool unpack_row_msb(const uint8_t* packed, int64_t m, uint8_t* out) {
  // spread[v]: the 8 bytes (v >> 7) & 1, ..., v & 1, in memory order
  static const struct Spread {
    uint64_t v[256];
    Spread() {
      for (int b = 0; b < 256; ++b) {
        uint8_t bytes[8];
        for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>((b >> (7 - i)) & 1);
        std::memcpy(&v[b], bytes, 8);
      }
    }
  } spread;
  const int64_t whole = m / 8;
  for (int64_t b = 0; b < whole; ++b) std::memcpy(out + 8 * b, &spread.v[packed[b]], 8);
  const int rest = static_cast<int>(m % 8);
  if (rest == 0) return true;
  const uint8_t last = packed[whole];
  for (int i = 0; i < rest; ++i) out[8 * whole + i] = static_cast<uint8_t>((last >> (7 - i)) & 1);
  return (last & ((1u << (8 - rest)) - 1u)) == 0;
}

// The packed words of one row (bit j % 64 of word j / 64 = column j) from its nb
// bytes packed big-endian (as unpack_row_msb reads them): each byte with its
// bits reversed. Padding bits land above column m: the caller checks they are 0.
inline void words_of_row_msb(const uint8_t* packed, int64_t nb, uint64_t* words) {
  static const struct Reverse {
    uint8_t v[256];
    Reverse() {
      for (int b = 0; b < 256; ++b) {
        int r = 0;
        for (int i = 0; i < 8; ++i) r |= ((b >> i) & 1) << (7 - i);
        v[b] = static_cast<uint8_t>(r);
      }
    }
  } reverse;
  for (int64_t b = 0; b < nb; ++b)
    words[b / 8] |= static_cast<uint64_t>(reverse.v[packed[b]]) << (8 * (b % 8));
}

}  // namespace bits
}  // namespace aces_fast
