// Small bit helpers shared by the kernels (internal header).
#pragma once

#include <algorithm>
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

// Number of set bits among the nw words at w (a packed row's passes).
inline int64_t count_words(const uint64_t* w, int64_t nw) {
  int64_t c = 0;
  for (int64_t q = 0; q < nw; ++q) c += popcount64(w[q]);
  return c;
}

// Bit k set iff x[k] != 0.0 (NaN counts as nonzero, as in `x != 0.0`), for
// len <= 64 doubles. Reads exactly x[0 .. len).
inline uint64_t nonzero_bits(const double* x, int64_t len) {
  uint64_t out = 0;
  int64_t k = 0;
#ifdef ACES_FAST_SSE2
  const __m128d zero = _mm_setzero_pd();
  for (; k + 2 <= len; k += 2) {
    const int b = _mm_movemask_pd(_mm_cmpneq_pd(_mm_loadu_pd(x + k), zero));
    out |= static_cast<uint64_t>(b) << k;
  }
#endif
  for (; k < len; ++k) out |= static_cast<uint64_t>(x[k] != 0.0) << k;
  return out;
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

// Reverses the bits inside every byte of x (three swap steps).
inline uint64_t reverse_bits_in_bytes(uint64_t x) {
  x = ((x >> 1) & 0x5555555555555555ULL) | ((x & 0x5555555555555555ULL) << 1);
  x = ((x >> 2) & 0x3333333333333333ULL) | ((x & 0x3333333333333333ULL) << 2);
  return ((x >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((x & 0x0F0F0F0F0F0F0F0FULL) << 4);
}

// The packed words of one row (bit j % 64 of word j / 64 = column j) from its nb
// bytes packed big-endian (as unpack_row_msb reads them): eight bytes loaded as
// one little-endian word put byte b at bits 8b..8b+7; reversing the bits inside
// every byte puts column 8b + i at bit 8b + i. Writes all ceil(nb / 8) words;
// padding bits land above column m (the caller checks they are 0). Reads
// exactly nb bytes.
inline void words_of_row_msb(const uint8_t* packed, int64_t nb, uint64_t* words) {
  const int64_t whole = nb / 8;
  for (int64_t q = 0; q < whole; ++q) {
    uint64_t x;
    std::memcpy(&x, packed + 8 * q, 8);
    words[q] = reverse_bits_in_bytes(portable::to_little_endian64(x));
  }
  const int64_t rest = nb - 8 * whole;
  if (rest > 0) {
    uint64_t x = 0;
    for (int64_t b = 0; b < rest; ++b) x |= static_cast<uint64_t>(packed[8 * whole + b]) << (8 * b);
    words[whole] = reverse_bits_in_bytes(x);
  }
}

// words_of_rows_msb of rows of 1 to 7 bytes (m <= 56, the usual stream
// task), one partial word a row: one load and a mask a row, the rows whose
// load would end past the matrix byte by byte (the general loop re-tests both
// cases every row; inlined in the batch driver it kept its bounds on the
// stack: 4% of a packed 100x50 task), the padding check fused with the bit
// reversal (pad > 0: fewer than 64 columns), which the compiler vectorizes.
inline uint64_t words_of_short_rows_msb(const uint8_t* packed, int64_t n, int64_t nb,
                                        uint64_t* words, int pad) {
  const int64_t total = n * nb;
  const uint64_t keep = (uint64_t(1) << (8 * nb)) - 1;
  const int64_t loads = total >= 8 ? std::min(n, (total - 8) / nb + 1) : 0;
  for (int64_t i = 0; i < loads; ++i) {
    uint64_t x;
    std::memcpy(&x, packed + i * nb, 8);
    words[i] = portable::to_little_endian64(x) & keep;
  }
  for (int64_t i = loads; i < n; ++i) {
    uint64_t x = 0;
    for (int64_t b = 0; b < nb; ++b) x |= static_cast<uint64_t>(packed[i * nb + b]) << (8 * b);
    words[i] = x;
  }
  uint64_t high = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t w = reverse_bits_in_bytes(words[i]);
    words[i] = w;
    high |= w >> pad;
  }
  return high;
}

// words_of_row_msb of the n rows of a matrix packed row after row (row i at
// packed + i * nb; ceil(nb / 8) words a row). A row whose length is not a
// multiple of eight bytes (m = 50: 7 bytes; m = 100: 13) ends in a partial
// word, which words_of_row_msb reads a byte at a time, a branch per byte; here
// that word is one eight-byte load, its bytes past the row masked off, for
// every row whose load ends inside the matrix: the same words, reading only
// the matrix's n * nb bytes. The bits are reversed in a second loop over all
// the words, which the compiler vectorizes: inside the row loop the three swap
// steps ran a word at a time (a 100x50 ACES-C task from packed rows, one
// thread: about 3% faster). Returns the OR of every row's last word shifted
// right by pad = m % 64: nonzero when a padding bit (above column m) is set
// (0 when pad is 0: no padding bits).
inline uint64_t words_of_rows_msb(const uint8_t* packed, int64_t n, int64_t nb, uint64_t* words,
                                  int pad) {
  if (nb > 0 && nb < 8) return words_of_short_rows_msb(packed, n, nb, words, pad);
  const int64_t whole = nb / 8, rest = nb - 8 * whole, nw = whole + (rest > 0 ? 1 : 0);
  const int64_t total = n * nb;
  const uint64_t keep = rest > 0 ? (uint64_t(1) << (8 * rest)) - 1 : 0;  // the row's bytes
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = packed + i * nb;
    uint64_t* w = words + i * nw;
    for (int64_t q = 0; q < whole; ++q) {
      uint64_t x;
      std::memcpy(&x, row + 8 * q, 8);
      w[q] = portable::to_little_endian64(x);
    }
    if (rest == 0) continue;
    uint64_t x = 0;
    if (i * nb + 8 * whole + 8 <= total) {
      std::memcpy(&x, row + 8 * whole, 8);
      x = portable::to_little_endian64(x) & keep;
    } else {
      for (int64_t b = 0; b < rest; ++b) x |= static_cast<uint64_t>(row[8 * whole + b]) << (8 * b);
    }
    w[whole] = x;
  }
  const int64_t count = n * nw;
  for (int64_t k = 0; k < count; ++k) words[k] = reverse_bits_in_bytes(words[k]);
  // a loop of its own: merged into the row loop above it ran 5% slower (the
  // compiler kept the accumulator in memory)
  uint64_t high = 0;
  if (pad)
    for (int64_t i = 0; i < n; ++i) high |= words[i * nw + nw - 1] >> pad;
  return high;
}

}  // namespace bits
}  // namespace aces_fast
