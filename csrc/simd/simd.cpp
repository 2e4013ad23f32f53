// Hand-vectorized kernels (see simd.hpp).
#include "simd/simd.hpp"

#include "simd/dispatch.hpp"

#if ACES_FAST_X86_SIMD
#include <immintrin.h>
// GCC 12's _mm512_cvtepu8_epi32 trips a false -Wmaybe-uninitialized (its
// undefined pass-through operand); vector arguments of static helpers trip -Wpsabi.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#include "kernels/ahead.hpp"
#include "kernels/bits.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace aces_fast {

alignas(32) const uint64_t kLaneMask4[16][4] = {{0, 0, 0, 0},
                                                {~0ULL, 0, 0, 0},
                                                {0, ~0ULL, 0, 0},
                                                {~0ULL, ~0ULL, 0, 0},
                                                {0, 0, ~0ULL, 0},
                                                {~0ULL, 0, ~0ULL, 0},
                                                {0, ~0ULL, ~0ULL, 0},
                                                {~0ULL, ~0ULL, ~0ULL, 0},
                                                {0, 0, 0, ~0ULL},
                                                {~0ULL, 0, 0, ~0ULL},
                                                {0, ~0ULL, 0, ~0ULL},
                                                {~0ULL, ~0ULL, 0, ~0ULL},
                                                {0, 0, ~0ULL, ~0ULL},
                                                {~0ULL, 0, ~0ULL, ~0ULL},
                                                {0, ~0ULL, ~0ULL, ~0ULL},
                                                {~0ULL, ~0ULL, ~0ULL, ~0ULL}};

namespace {

// ---- portable versions (the definitions the SIMD ones reproduce) ---------------

int64_t pack_row_portable(const uint8_t* row, int64_t m, uint64_t* words, uint8_t* high) {
  int64_t passes = 0;
  for (int64_t j = 0, q = 0; j < m; j += 64, ++q) {
    words[q] = bits::pass_bits(row + j, m - j < 64 ? m - j : 64);
    passes += bits::popcount64(words[q]);
  }
  if (high) {
    uint8_t any = 0;
    for (int64_t j = 0; j < m; ++j) any |= row[j];
    if (any & 0xFE) *high = 1;
  }
  return passes;
}

// The row scores of RowsDot for R rows at once (their add chains interleave):
// wr[r] is row r's packed words. G = ceil(m / 4) groups, nw = ceil(m / 64) words.
template <int R>
void nibble_dot_rows(const uint64_t* const* wr, int64_t nw, int64_t G, const double* T,
                     double* out) {
  double acc[R];
  for (int r = 0; r < R; ++r) acc[r] = 0.0;
  ahead::Lines* const pf = ahead::pending();
  for (int64_t q = 0; q < nw; ++q) {
    if (pf) pf->tick((R + 3) / 4);  // a line per four rows and word
    const double* Tq = T + 256 * q;
    const int64_t ng = std::min<int64_t>(16, G - 16 * q);
    uint64_t x[R];
    double part[R];
    for (int r = 0; r < R; ++r) {
      x[r] = wr[r][q];
      part[r] = Tq[x[r] & 15];
    }
    for (int64_t t = 1; t < ng; ++t)
      for (int r = 0; r < R; ++r) part[r] += Tq[16 * t + ((x[r] >> (4 * t)) & 15)];
    for (int r = 0; r < R; ++r) acc[r] += part[r];
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

// Scalar table lookups at every level below AVX-512: AVX2 has no 16-entry
// double permute, and its gathers measured no faster than these loads. Eight
// rows at a time keep more independent add chains in flight than four (two
// FP adders of 3-4 cycles' latency): rows_dot's share of a 200x500 batch
// fell from 20.8% to 18.9% of the samples on an AVX2 EPYC.
void rows_dot_portable(const uint64_t* words, int64_t m, const int64_t* rows, int64_t nrows,
                       const double* T, double* out) {
  const int64_t nw = (m + 63) / 64, G = (m + 3) / 4;
  int64_t k = 0;
  for (; k + 8 <= nrows; k += 8) {
    const uint64_t* eight[8];
    for (int r = 0; r < 8; ++r) eight[r] = words + rows[k + r] * nw;
    nibble_dot_rows<8>(eight, nw, G, T, out + k);
  }
  for (; k + 4 <= nrows; k += 4) {
    const uint64_t* four[4] = {words + rows[k] * nw, words + rows[k + 1] * nw,
                               words + rows[k + 2] * nw, words + rows[k + 3] * nw};
    nibble_dot_rows<4>(four, nw, G, T, out + k);
  }
  for (; k < nrows; ++k) {
    const uint64_t* one[1] = {words + rows[k] * nw};
    nibble_dot_rows<1>(one, nw, G, T, out + k);
  }
}

ACES_FAST_KERNEL_BODY uint8_t max_byte_body(const uint8_t* p, int64_t len) {
  // 64 running maxima (a plain reduction loop is not vectorized by GCC 12)
  uint8_t lane[64] = {};
  int64_t i = 0;
  for (; i + 64 <= len; i += 64)
    for (int k = 0; k < 64; ++k) lane[k] = p[i + k] > lane[k] ? p[i + k] : lane[k];
  uint8_t mx = 0;
  for (; i < len; ++i) mx = p[i] > mx ? p[i] : mx;
  for (int k = 0; k < 64; ++k) mx = lane[k] > mx ? lane[k] : mx;
  return mx;
}

#if ACES_FAST_X86_SIMD

// Lambdas would not inherit a function's target attribute; these helpers carry it.
#define ACES_FAST_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline
#define ACES_FAST_AVX2 __attribute__((target("avx2"), always_inline)) inline

// Lanes whose byte is nonzero, for 16 bytes at src.
ACES_FAST_AVX512 __mmask16 pass16(const uint8_t* src) {
  const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  return _mm512_test_epi32_mask(x, x);
}

// pass16 for the first lanes of k only (bytes past them are not read).
ACES_FAST_AVX512 __mmask16 pass16_masked(const uint8_t* src, __mmask16 k) {
  const __m512i x = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, src));
  return _mm512_test_epi32_mask(x, x);
}

// finish16 for the lanes of k only.
ACES_FAST_AVX512 void finish16_masked(int64_t jj, __m512i p, __m512i av, bool adjacent,
                                      const int32_t* prev, int32_t* cur, uint32_t* acc,
                                      uint32_t* Ptot, __mmask16 k) {
  __m512i t = _mm512_add_epi32(av, p);
  if (adjacent) t = _mm512_add_epi32(t, _mm512_maskz_loadu_epi32(k, prev + jj));
  _mm512_mask_storeu_epi32(
      acc + jj, k,
      _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, acc + jj), _mm512_mullo_epi32(p, t)));
  _mm512_mask_storeu_epi32(Ptot + jj, k,
                           _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, Ptot + jj), p));
  _mm512_mask_storeu_epi32(cur + jj, k, p);
}

ACES_FAST_AVX512 void finish16(int64_t jj, __m512i p, __m512i av, bool adjacent,
                               const int32_t* prev, int32_t* cur, uint32_t* acc, uint32_t* Ptot) {
  __m512i t = _mm512_add_epi32(av, p);
  if (adjacent) t = _mm512_add_epi32(t, _mm512_loadu_si512(prev + jj));
  _mm512_storeu_si512(acc + jj,
                      _mm512_add_epi32(_mm512_loadu_si512(acc + jj), _mm512_mullo_epi32(p, t)));
  _mm512_storeu_si512(Ptot + jj, _mm512_add_epi32(_mm512_loadu_si512(Ptot + jj), p));
  _mm512_storeu_si512(cur + jj, p);
}

// p + c in the lanes whose byte (8 bytes at src) is nonzero.
ACES_FAST_AVX2 __m256i add8(__m256i p, const uint8_t* src, __m256i c) {
  const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  return _mm256_add_epi32(p, _mm256_andnot_si256(_mm256_cmpeq_epi32(x, _mm256_setzero_si256()), c));
}

ACES_FAST_AVX2 __m256i ld8(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

ACES_FAST_AVX2 void finish8(int64_t jj, __m256i p, __m256i av, bool adjacent, const int32_t* prev,
                            int32_t* cur, uint32_t* acc, uint32_t* Ptot) {
  __m256i t = _mm256_add_epi32(av, p);
  if (adjacent) t = _mm256_add_epi32(t, ld8(prev + jj));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + jj),
                      _mm256_add_epi32(ld8(acc + jj), _mm256_mullo_epi32(p, t)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(Ptot + jj), _mm256_add_epi32(ld8(Ptot + jj), p));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(cur + jj), p);
}

// Counts == nullptr: every row counts once.
__attribute__((target("avx512f,avx512bw,avx512vl"))) int64_t
step_avx512(const uint8_t* B, int64_t m, const int64_t* counts, const int64_t* row_of, int64_t rbeg,
            int64_t rend, int64_t col0, int64_t bw, uint32_t a, bool adjacent, const int32_t* prev,
            int32_t* cur, uint32_t* acc, uint32_t* Ptot) {
  const int64_t len = bw / 16 * 16;
  const __m512i av = _mm512_set1_epi32(static_cast<int32_t>(a));
  const __m512i one = _mm512_set1_epi32(1);
  int64_t jj = 0;
  // 64 columns (one cache line of each row) per visit of the level's rows
  for (; jj + 64 <= len; jj += 64) {
    __m512i p0 = _mm512_setzero_si512(), p1 = p0, p2 = p0, p3 = p0;
    for (int64_t r = rbeg; r < rend; ++r) {
      const int64_t i = row_of[r];
      const uint8_t* row = B + i * m + col0 + jj;
      const __m512i c = counts ? _mm512_set1_epi32(static_cast<int32_t>(counts[i])) : one;
      p0 = _mm512_mask_add_epi32(p0, pass16(row), p0, c);
      p1 = _mm512_mask_add_epi32(p1, pass16(row + 16), p1, c);
      p2 = _mm512_mask_add_epi32(p2, pass16(row + 32), p2, c);
      p3 = _mm512_mask_add_epi32(p3, pass16(row + 48), p3, c);
    }
    finish16(jj, p0, av, adjacent, prev, cur, acc, Ptot);
    finish16(jj + 16, p1, av, adjacent, prev, cur, acc, Ptot);
    finish16(jj + 32, p2, av, adjacent, prev, cur, acc, Ptot);
    finish16(jj + 48, p3, av, adjacent, prev, cur, acc, Ptot);
  }
  for (; jj < len; jj += 16) {
    __m512i p = _mm512_setzero_si512();
    for (int64_t r = rbeg; r < rend; ++r) {
      const int64_t i = row_of[r];
      const __m512i c = counts ? _mm512_set1_epi32(static_cast<int32_t>(counts[i])) : one;
      p = _mm512_mask_add_epi32(p, pass16(B + i * m + col0 + jj), p, c);
    }
    finish16(jj, p, av, adjacent, prev, cur, acc, Ptot);
  }
  if (len < bw) {
    // the last bw - len < 16 columns through masks (no scalar tail)
    const __mmask16 k = static_cast<__mmask16>((1u << (bw - len)) - 1);
    __m512i p = _mm512_setzero_si512();
    for (int64_t r = rbeg; r < rend; ++r) {
      const int64_t i = row_of[r];
      const __m512i c = counts ? _mm512_set1_epi32(static_cast<int32_t>(counts[i])) : one;
      p = _mm512_mask_add_epi32(p, pass16_masked(B + i * m + col0 + len, k), p, c);
    }
    finish16_masked(len, p, av, adjacent, prev, cur, acc, Ptot, k);
  }
  return bw;
}

__attribute__((target("avx2"))) int64_t step_avx2(const uint8_t* B, int64_t m,
                                                  const int64_t* counts, const int64_t* row_of,
                                                  int64_t rbeg, int64_t rend, int64_t col0,
                                                  int64_t bw, uint32_t a, bool adjacent,
                                                  const int32_t* prev, int32_t* cur, uint32_t* acc,
                                                  uint32_t* Ptot) {
  const int64_t len = bw / 8 * 8;
  const __m256i av = _mm256_set1_epi32(static_cast<int32_t>(a));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i zero = _mm256_setzero_si256();
  int64_t jj = 0;
  for (; jj + 32 <= len; jj += 32) {
    __m256i p0 = zero, p1 = zero, p2 = zero, p3 = zero;
    for (int64_t r = rbeg; r < rend; ++r) {
      const int64_t i = row_of[r];
      const uint8_t* row = B + i * m + col0 + jj;
      const __m256i c = counts ? _mm256_set1_epi32(static_cast<int32_t>(counts[i])) : one;
      p0 = add8(p0, row, c);
      p1 = add8(p1, row + 8, c);
      p2 = add8(p2, row + 16, c);
      p3 = add8(p3, row + 24, c);
    }
    finish8(jj, p0, av, adjacent, prev, cur, acc, Ptot);
    finish8(jj + 8, p1, av, adjacent, prev, cur, acc, Ptot);
    finish8(jj + 16, p2, av, adjacent, prev, cur, acc, Ptot);
    finish8(jj + 24, p3, av, adjacent, prev, cur, acc, Ptot);
  }
  for (; jj < len; jj += 8) {
    __m256i p = zero;
    for (int64_t r = rbeg; r < rend; ++r) {
      const int64_t i = row_of[r];
      const __m256i c = counts ? _mm256_set1_epi32(static_cast<int32_t>(counts[i])) : one;
      p = add8(p, B + i * m + col0 + jj, c);
    }
    finish8(jj, p, av, adjacent, prev, cur, acc, Ptot);
  }
  return len;
}

// Lane arithmetic of uniform_block_avx512_impl: 32-bit lanes (sixteen per
// register, four registers per 64 columns) or, for a total multiplicity tot <=
// kMaxTot16, 16-bit lanes (thirty-two per register, two): every count (<= tot),
// a_k (<= 2 tot) and sum is then taken modulo 2^16, and the result 2 wins + ties
// = acc - P^2 is at most 2 P F <= tot^2 / 2 < 2^16, so it comes out exact, as in
// 32-bit lanes -- with twice the columns per instruction.
#define ACES_FAST_AVX512_LANES \
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline
constexpr uint32_t kMaxTot16 = 361;

struct Lanes32 {
  using T = uint32_t;
  using Mask = __mmask16;
  static constexpr int kPer = 16;
  ACES_FAST_AVX512_LANES __m512i set1(uint32_t x) {
    return _mm512_set1_epi32(static_cast<int32_t>(x));
  }
  ACES_FAST_AVX512_LANES __m512i add(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
  ACES_FAST_AVX512_LANES __m512i sub(__m512i a, __m512i b) { return _mm512_sub_epi32(a, b); }
  ACES_FAST_AVX512_LANES __m512i mask_add(__m512i a, Mask k, __m512i b) {
    return _mm512_mask_add_epi32(a, k, a, b);
  }
  ACES_FAST_AVX512_LANES __m512i maskz_mov(Mask k, __m512i a) {
    return _mm512_maskz_mov_epi32(k, a);
  }
  ACES_FAST_AVX512_LANES __m512i mullo(__m512i a, __m512i b) { return _mm512_mullo_epi32(a, b); }
};

struct Lanes16 {
  using T = uint16_t;
  using Mask = __mmask32;
  static constexpr int kPer = 32;
  ACES_FAST_AVX512_LANES __m512i set1(uint32_t x) {
    return _mm512_set1_epi16(static_cast<int16_t>(static_cast<uint16_t>(x)));
  }
  ACES_FAST_AVX512_LANES __m512i add(__m512i a, __m512i b) { return _mm512_add_epi16(a, b); }
  ACES_FAST_AVX512_LANES __m512i sub(__m512i a, __m512i b) { return _mm512_sub_epi16(a, b); }
  ACES_FAST_AVX512_LANES __m512i mask_add(__m512i a, Mask k, __m512i b) {
    return _mm512_mask_add_epi16(a, k, a, b);
  }
  ACES_FAST_AVX512_LANES __m512i maskz_mov(Mask k, __m512i a) {
    return _mm512_maskz_mov_epi16(k, a);
  }
  ACES_FAST_AVX512_LANES __m512i mullo(__m512i a, __m512i b) { return _mm512_mullo_epi16(a, b); }
};

// A block's LOO-AUCs from its lane sums, eight columns per instruction:
// twice[jj] = 2 wins + ties and P[jj] (uint16 or uint32, jj < 64) give
// out[jj] = twice / (2 P F), F = tot - P, or NaN where P or F is 0, for jj <
// len; colsum[jj] = P when colsum is not null. The same IEEE operations as the
// scalar form (integers below 2^32 convert exactly, each product and the
// quotient round once), so the same bits; the scalar division's latency was
// about half of a 24x100 task's block kernel.
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m256i load8_u32(
    const T* p) {
  if constexpr (sizeof(T) == 2)
    return _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  else
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void finish_avx512(
    const T* twice, const T* P, int64_t len, uint32_t tot, double* out, int64_t* colsum) {
  const __m512d two = _mm512_set1_pd(2.0);
  const __m512d totd = _mm512_set1_pd(static_cast<double>(tot));
  const __m512d nan = _mm512_set1_pd(std::numeric_limits<double>::quiet_NaN());
  const __m256i zero = _mm256_setzero_si256();
  const __m256i totv = _mm256_set1_epi32(static_cast<int32_t>(tot));
  for (int64_t c = 0; c < len; c += 8) {
    const __mmask8 k = len - c >= 8 ? __mmask8(0xFF) : __mmask8((1u << (len - c)) - 1);
    const __m256i pv = load8_u32(P + c);
    const __m512d Pd = _mm512_cvtepu32_pd(pv);
    const __m512d q = _mm512_div_pd(_mm512_cvtepu32_pd(load8_u32(twice + c)),
                                    _mm512_mul_pd(_mm512_mul_pd(two, Pd), _mm512_sub_pd(totd, Pd)));
    const __mmask8 none = _mm256_cmpeq_epi32_mask(pv, zero) | _mm256_cmpeq_epi32_mask(pv, totv);
    _mm512_mask_storeu_pd(out + c, k, _mm512_mask_blend_pd(none, q, nan));
    if (colsum) _mm512_mask_storeu_epi64(colsum + c, k, _mm512_cvtepu32_epi64(pv));
  }
}

// One pass of the block over NB words (64 NB columns) from column jb, every
// one of them inside the block (the last may be partial), with the sums in
// registers (the level loop is inside): no per-level load and store of acc, P
// and the previous level's passers. A level of one row with count 1 (most
// levels when rows are distinct) has p in {0, 1}: p (a + p + prev) is
// a + 1 + prev under the row's mask, no multiply. Integer sums: the same
// values as the step kernels, whatever NB.
//
// `pass(i, jb, lanes)` is row i's pass mask of the block's 64 columns from jb
// (BytePass512 or WordPass512), bits past the block's `lanes` clear.
template <typename L, bool kCounts, int NB, class Pass>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void uniform_pass_avx512(
    const Pass& pass_of, const int64_t* counts, const int64_t* row_of, const int64_t* lstart,
    const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot, int64_t bw, int64_t jb,
    double* out, int64_t* colsum) {
  constexpr int V = 64 / L::kPer;  // registers per 64 columns
  constexpr int VN = V * NB;       // registers per pass of NB words
  const __m512i one = L::set1(1);
  const __m512i zero = _mm512_setzero_si512();
  ahead::Lines* const pf = ahead::pending();
  __mmask64 lanes[NB];  // the columns of word u of this pass inside the block
  for (int u = 0; u < NB; ++u) {
    const int64_t len = std::min<int64_t>(64, bw - jb - 64 * u);
    lanes[u] = len == 64 ? ~0ULL : (~0ULL >> (64 - len));
  }
  __m512i acc[VN], P[VN], prev[VN];
  for (int v = 0; v < VN; ++v) acc[v] = P[v] = prev[v] = zero;
  for (int64_t k = 0; k < nlev; ++k) {
    if (pf) pf->tick(NB);  // about the rate of memory (kernels/ahead.hpp)
    const int64_t rbeg = lstart[k], rend = lstart[k + 1];
    const __m512i av = L::set1(a[k]);
    const bool adj = adjacent[k] != 0;
    const int64_t i0 = row_of[rbeg];
    __mmask64 pass[NB];
    if (rend - rbeg == 1 && (!kCounts || counts[i0] == 1)) {
      for (int u = 0; u < NB; ++u) pass[u] = pass_of(i0, jb + 64 * u, lanes[u]);
      const __m512i a1 = L::add(av, one);
      for (int v = 0; v < VN; ++v) {
        const auto kv = static_cast<typename L::Mask>(pass[v / V] >> (L::kPer * (v % V)));
        const __m512i t = adj ? L::add(a1, prev[v]) : a1;
        acc[v] = L::mask_add(acc[v], kv, t);
        P[v] = L::mask_add(P[v], kv, one);
        prev[v] = L::maskz_mov(kv, one);
      }
      continue;
    }
    __m512i p[VN];
    for (int v = 0; v < VN; ++v) p[v] = zero;
    for (int64_t r = rbeg; r < rend; ++r) {
      const int64_t i = row_of[r];
      for (int u = 0; u < NB; ++u) pass[u] = pass_of(i, jb + 64 * u, lanes[u]);
      const __m512i c = kCounts ? L::set1(static_cast<uint32_t>(counts[i])) : one;
      for (int v = 0; v < VN; ++v)
        p[v] =
            L::mask_add(p[v], static_cast<typename L::Mask>(pass[v / V] >> (L::kPer * (v % V))), c);
    }
    for (int v = 0; v < VN; ++v) {
      __m512i t = L::add(av, p[v]);
      if (adj) t = L::add(t, prev[v]);
      acc[v] = L::add(acc[v], L::mullo(p[v], t));
      P[v] = L::add(P[v], p[v]);
      prev[v] = p[v];
    }
  }
  for (int u = 0; u < NB; ++u) {
    const int64_t j = jb + 64 * u;
    alignas(64) typename L::T twice[64], Ps[64];
    for (int v = 0; v < V; ++v) {
      // 2 wins + ties = acc - P^2, modulo 2^(lane bits): exact (see above)
      const int w = u * V + v;
      _mm512_store_si512(twice + L::kPer * v, L::sub(acc[w], L::mullo(P[w], P[w])));
      _mm512_store_si512(Ps + L::kPer * v, P[w]);
    }
    finish_avx512(twice, Ps, std::min<int64_t>(64, bw - j), tot, out + j,
                  colsum ? colsum + j : nullptr);
  }
}

// The whole block in passes of up to kMaxNB words: four, two or one at a time,
// as many as are left (a pass over words past the block would do their work
// for nothing: a 100-column block is two words).
template <typename L, bool kCounts, int kMaxNB, class Pass>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void uniform_block_avx512_impl(
    const Pass& pass_of, const int64_t* counts, const int64_t* row_of, const int64_t* lstart,
    const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot, int64_t bw, double* out,
    int64_t* colsum) {
  for (int64_t jb = 0; jb < bw;) {
    const int64_t left = (bw - jb + 63) / 64;  // words
    const int nb = kMaxNB >= 4 && left >= 4 ? 4 : kMaxNB >= 2 && left >= 2 ? 2 : 1;
    if constexpr (kMaxNB >= 4)
      if (nb == 4)
        uniform_pass_avx512<L, kCounts, 4>(pass_of, counts, row_of, lstart, a, adjacent, nlev, tot,
                                           bw, jb, out, colsum);
    if constexpr (kMaxNB >= 2)
      if (nb == 2)
        uniform_pass_avx512<L, kCounts, 2>(pass_of, counts, row_of, lstart, a, adjacent, nlev, tot,
                                           bw, jb, out, colsum);
    if (nb == 1)
      uniform_pass_avx512<L, kCounts, 1>(pass_of, counts, row_of, lstart, a, adjacent, nlev, tot,
                                         bw, jb, out, colsum);
    jb += 64 * nb;
  }
}

// A row's pass mask of 64 columns from its bytes: one masked load (no byte
// past the block is read) and a test.
struct BytePass512 {
  const uint8_t* B;
  int64_t m, col0;
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) __mmask64
  operator()(int64_t i, int64_t jb, __mmask64 lanes) const {
    const __m512i bytes = _mm512_maskz_loadu_epi8(lanes, B + i * m + col0 + jb);
    return _mm512_test_epi8_mask(bytes, bytes);
  }
};

// A row's pass mask of 64 columns from its packed word (col0 and jb multiples
// of 64): the word is the mask.
struct WordPass512 {
  const uint64_t* words;
  int64_t nw, q0;  // words per row; the block's first word
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) __mmask64
  operator()(int64_t i, int64_t jb, __mmask64 lanes) const {
    return words[i * nw + q0 + jb / 64] & lanes;
  }
};

// The four 16-bit lane masks (-1 where the byte is nonzero) of the len <= 64
// bytes at src; a short block is copied to tail first, so no byte past it is read.
__attribute__((target("avx2"), always_inline)) inline void row_masks16_avx2(const uint8_t* src,
                                                                            int64_t len,
                                                                            uint8_t* tail,
                                                                            __m256i* mw) {
  if (len < 64) {
    std::memcpy(tail, src, static_cast<size_t>(len));
    std::memset(tail + len, 0, static_cast<size_t>(64 - len));
    src = tail;
  }
  const __m256i zero = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32 * h));
    const __m256i on = _mm256_xor_si256(_mm256_cmpeq_epi8(x, zero), _mm256_set1_epi8(-1));
    mw[2 * h] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(on));
    mw[2 * h + 1] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(on, 1));
  }
}

// The lane masks of a row's 64-column block from its bytes (row_masks16_avx2).
struct ByteRows {
  const uint8_t* B;
  int64_t m, col0;
  uint8_t* tail;  // 64 bytes
  ACES_FAST_AVX2 void operator()(int64_t i, int64_t jb, int64_t len, __m256i* mw) const {
    row_masks16_avx2(B + i * m + col0 + jb, len, tail, mw);
  }
};

// The lane masks of a row's 64-column block from its packed word (col0 and jb
// multiples of 64): the word broadcast, each register's two bytes spread over
// its sixteen 16-bit lanes (a byte shuffle: lanes 0-7 take byte 2v, lanes 8-15
// byte 2v + 1), and lane l tested against bit l % 8. Three instructions per
// register instead of reading 64 bytes.
struct WordRows {
  const uint64_t* words;
  int64_t nw, q0;  // words per row; the block's first word
  ACES_FAST_AVX2 void operator()(int64_t i, int64_t jb, int64_t len, __m256i* mw) const {
    uint64_t w = words[i * nw + q0 + jb / 64];
    if (len < 64) w &= (uint64_t(1) << len) - 1;  // bits past m are 0 already
    const __m256i x = _mm256_set1_epi64x(static_cast<long long>(w));
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    for (int v = 0; v < 4; ++v) {
      const __m256i spread = _mm256_shuffle_epi8(
          x, _mm256_setr_epi64x(0x0101010101010101LL * (2 * v), 0x0101010101010101LL * (2 * v),
                                0x0101010101010101LL * (2 * v + 1),
                                0x0101010101010101LL * (2 * v + 1)));
      mw[v] = _mm256_cmpeq_epi16(_mm256_and_si256(spread, bit), bit);
    }
  }
};

// finish_avx512 at AVX2 for 16-bit sums, four columns per instruction (the
// same bits); a short block's results go through tmp.
__attribute__((target("avx2"), always_inline)) inline void finish16_avx2(const uint16_t* twice,
                                                                         const uint16_t* P,
                                                                         int64_t len, uint32_t tot,
                                                                         double* out,
                                                                         int64_t* colsum) {
  const __m256d two = _mm256_set1_pd(2.0);
  const __m256d totd = _mm256_set1_pd(static_cast<double>(tot));
  const __m256d nan = _mm256_set1_pd(std::numeric_limits<double>::quiet_NaN());
  const __m128i zero = _mm_setzero_si128();
  const __m128i totv = _mm_set1_epi32(static_cast<int32_t>(tot));
  alignas(32) double tmp[64];
  double* dst = len == 64 ? out : tmp;
  for (int64_t c = 0; c < len; c += 4) {
    const __m128i pv = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(P + c)));
    const __m128i tv =
        _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(twice + c)));
    const __m256d Pd = _mm256_cvtepi32_pd(pv);
    const __m256d q = _mm256_div_pd(_mm256_cvtepi32_pd(tv),
                                    _mm256_mul_pd(_mm256_mul_pd(two, Pd), _mm256_sub_pd(totd, Pd)));
    const __m128i none32 = _mm_or_si128(_mm_cmpeq_epi32(pv, zero), _mm_cmpeq_epi32(pv, totv));
    const __m256d none = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(none32));
    _mm256_storeu_pd(dst + c, _mm256_blendv_pd(q, nan, none));
  }
  if (dst == tmp) std::memcpy(out, tmp, static_cast<size_t>(len) * sizeof(double));
  if (colsum)
    for (int64_t jj = 0; jj < len; ++jj) colsum[jj] = static_cast<int64_t>(P[jj]);
}

// uniform_block_avx512_impl<Lanes16> at AVX2, for a total multiplicity tot <=
// kMaxTot16 (the same modulo-2^16 argument): 64 columns as four registers of
// sixteen 16-bit lanes, a row's pass flags widened to lane masks (-1 where the
// row passes; `masks`: ByteRows or WordRows), so a masked add is an and + add
// and a count is a subtraction of the mask. Integer sums: the values of every
// other variant.
template <bool kCounts, class Masks>
__attribute__((target("avx2"))) void uniform_block16_avx2_impl(
    const Masks& masks, const int64_t* counts, const int64_t* row_of, const int64_t* lstart,
    const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot, int64_t bw, double* out,
    int64_t* colsum) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi16(1);
  ahead::Lines* const pf = ahead::pending();
  for (int64_t jb = 0; jb < bw; jb += 64) {
    const int64_t len = std::min<int64_t>(64, bw - jb);
    __m256i acc[4], P[4], prev[4];
    for (int v = 0; v < 4; ++v) acc[v] = P[v] = prev[v] = zero;
    for (int64_t k = 0; k < nlev; ++k) {
      if (pf) pf->tick(1);  // about the rate of memory (kernels/ahead.hpp)
      const int64_t rbeg = lstart[k], rend = lstart[k + 1];
      const __m256i av = _mm256_set1_epi16(static_cast<int16_t>(static_cast<uint16_t>(a[k])));
      const bool adj = adjacent[k] != 0;
      const int64_t i0 = row_of[rbeg];
      __m256i mw[4];
      if (rend - rbeg == 1 && (!kCounts || counts[i0] == 1)) {
        masks(i0, jb, len, mw);
        const __m256i a1 = _mm256_add_epi16(av, one);
        for (int v = 0; v < 4; ++v) {
          const __m256i t = adj ? _mm256_add_epi16(a1, prev[v]) : a1;
          acc[v] = _mm256_add_epi16(acc[v], _mm256_and_si256(mw[v], t));
          P[v] = _mm256_sub_epi16(P[v], mw[v]);
          prev[v] = _mm256_sub_epi16(zero, mw[v]);
        }
        continue;
      }
      __m256i p[4] = {zero, zero, zero, zero};
      for (int64_t r = rbeg; r < rend; ++r) {
        const int64_t i = row_of[r];
        masks(i, jb, len, mw);
        const __m256i c = _mm256_set1_epi16(
            static_cast<int16_t>(kCounts ? static_cast<uint16_t>(counts[i]) : uint16_t(1)));
        for (int v = 0; v < 4; ++v) p[v] = _mm256_add_epi16(p[v], _mm256_and_si256(mw[v], c));
      }
      for (int v = 0; v < 4; ++v) {
        __m256i t = _mm256_add_epi16(av, p[v]);
        if (adj) t = _mm256_add_epi16(t, prev[v]);
        acc[v] = _mm256_add_epi16(acc[v], _mm256_mullo_epi16(p[v], t));
        P[v] = _mm256_add_epi16(P[v], p[v]);
        prev[v] = p[v];
      }
    }
    alignas(32) uint16_t twice[64], Ps[64];
    for (int v = 0; v < 4; ++v) {
      const __m256i t = _mm256_sub_epi16(acc[v], _mm256_mullo_epi16(P[v], P[v]));  // exact
      _mm256_store_si256(reinterpret_cast<__m256i*>(twice + 16 * v), t);
      _mm256_store_si256(reinterpret_cast<__m256i*>(Ps + 16 * v), P[v]);
    }
    finish16_avx2(twice, Ps, len, tot, out + jb, colsum ? colsum + jb : nullptr);
  }
}

// uniform_block16_avx2_impl with or without row counts.
template <class Masks>
__attribute__((target("avx2"))) void uniform_block16_avx2_rows(
    const Masks& masks, const int64_t* counts, const int64_t* row_of, const int64_t* lstart,
    const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot, int64_t bw, double* out,
    int64_t* colsum) {
  if (counts)
    uniform_block16_avx2_impl<true>(masks, counts, row_of, lstart, a, adjacent, nlev, tot, bw, out,
                                    colsum);
  else
    uniform_block16_avx2_impl<false>(masks, counts, row_of, lstart, a, adjacent, nlev, tot, bw, out,
                                     colsum);
}

__attribute__((target("avx2"))) void uniform_block16_avx2(
    const uint8_t* B, int64_t m, const int64_t* counts, const int64_t* row_of,
    const int64_t* lstart, const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot,
    int64_t col0, int64_t bw, double* out, int64_t* colsum) {
  alignas(32) uint8_t tail[64];
  uniform_block16_avx2_rows(ByteRows{B, m, col0, tail}, counts, row_of, lstart, a, adjacent, nlev,
                            tot, bw, out, colsum);
}

__attribute__((target("avx2"))) void uniform_block16_words_avx2(
    const uint64_t* words, int64_t nw, const int64_t* counts, const int64_t* row_of,
    const int64_t* lstart, const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot,
    int64_t col0, int64_t bw, double* out, int64_t* colsum) {
  uniform_block16_avx2_rows(WordRows{words, nw, col0 / 64}, counts, row_of, lstart, a, adjacent,
                            nlev, tot, bw, out, colsum);
}

// Most words (64 columns each) of a row that uniform_block_avx512_impl handles
// per visit of the row. Every level costs some scalar work per pass (its
// bounds, a_k, its rows' indices, a data-dependent branch), so a pass over more
// words pays it less often: with 16-bit lanes, passes of four words (eight
// registers each of acc, P and prev) cut ACES-C on distinct 200x500 tasks by
// about 2% in cache (Ice Lake Xeon, one thread, alternated runs), though the
// compiler then spills a few registers. 32-bit lanes need twice the registers
// per word: one word.
constexpr int kPassWords16 = 4;
constexpr int kPassWords32 = 1;

// uniform_block_avx512_impl in the lane width that tot allows, with or
// without row counts.
template <class Pass>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void uniform_block_avx512_lanes(
    const Pass& pass_of, const int64_t* counts, const int64_t* row_of, const int64_t* lstart,
    const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot, int64_t bw, double* out,
    int64_t* colsum) {
  const bool narrow = tot <= kMaxTot16;
  if (narrow && counts)
    uniform_block_avx512_impl<Lanes16, true, kPassWords16>(pass_of, counts, row_of, lstart, a,
                                                           adjacent, nlev, tot, bw, out, colsum);
  else if (narrow)
    uniform_block_avx512_impl<Lanes16, false, kPassWords16>(pass_of, counts, row_of, lstart, a,
                                                            adjacent, nlev, tot, bw, out, colsum);
  else if (counts)
    uniform_block_avx512_impl<Lanes32, true, kPassWords32>(pass_of, counts, row_of, lstart, a,
                                                           adjacent, nlev, tot, bw, out, colsum);
  else
    uniform_block_avx512_impl<Lanes32, false, kPassWords32>(pass_of, counts, row_of, lstart, a,
                                                            adjacent, nlev, tot, bw, out, colsum);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void uniform_block_avx512(
    const uint8_t* B, int64_t m, const int64_t* counts, const int64_t* row_of,
    const int64_t* lstart, const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot,
    int64_t col0, int64_t bw, double* out, int64_t* colsum) {
  uniform_block_avx512_lanes(BytePass512{B, m, col0}, counts, row_of, lstart, a, adjacent, nlev,
                             tot, bw, out, colsum);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void uniform_block_words_avx512(
    const uint64_t* words, int64_t nw, const int64_t* counts, const int64_t* row_of,
    const int64_t* lstart, const uint32_t* a, const uint8_t* adjacent, int64_t nlev, uint32_t tot,
    int64_t col0, int64_t bw, double* out, int64_t* colsum) {
  uniform_block_avx512_lanes(WordPass512{words, nw, col0 / 64}, counts, row_of, lstart, a, adjacent,
                             nlev, tot, bw, out, colsum);
}

// ---- bit packing and row dot products ------------------------------------------

#define ACES_FAST_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl,popcnt")))

// Row length (bytes) from which pack_row_avx512 prefetches ahead, and how far.
constexpr int64_t kPackAheadColumns = 256;
constexpr int64_t kPackAheadBytes = 2048;

ACES_FAST_AVX512BW int64_t pack_row_avx512(const uint8_t* row, int64_t m, uint64_t* words,
                                           uint8_t* high) {
  int64_t passes = 0, q = 0, j = 0;
  __m512i any = _mm512_setzero_si512();
  for (; j + 64 <= m; j += 64, ++q) {
    // Long rows: the bytes kPackAheadBytes ahead (a prefetch never faults, past the row
    // or the matrix included). On an Ice Lake Xeon this loop waited on L2 even
    // for a matrix already there, at about 5 cycles a line: 200x500 ACES-C
    // 2-4% faster in cache and 3-6% in a batch. Short rows lose by it (24x100
    // about 1%), and the AVX2 variant measured -3% to +5%: neither has it.
    if (m >= kPackAheadColumns)
      _mm_prefetch(reinterpret_cast<const char*>(row + j + kPackAheadBytes), _MM_HINT_T0);
    const __m512i x = _mm512_loadu_si512(row + j);
    any = _mm512_or_si512(any, x);
    words[q] = _mm512_test_epi8_mask(x, x);
    passes += _mm_popcnt_u64(words[q]);
  }
  if (j < m) {
    // masked-off bytes are neither read nor able to fault
    const __m512i x = _mm512_maskz_loadu_epi8(~0ULL >> (64 - (m - j)), row + j);
    any = _mm512_or_si512(any, x);
    words[q] = _mm512_test_epi8_mask(x, x);
    passes += _mm_popcnt_u64(words[q]);
  }
  if (high && _mm512_test_epi8_mask(any, _mm512_set1_epi8(static_cast<char>(0xFE))) != 0) *high = 1;
  return passes;
}

__attribute__((target("avx2,popcnt"))) int64_t pack_row_avx2(const uint8_t* row, int64_t m,
                                                             uint64_t* words, uint8_t* high) {
  int64_t passes = 0, q = 0, j = 0;
  const __m256i zero = _mm256_setzero_si256();
  __m256i any = zero;
  for (; j + 64 <= m; j += 64, ++q) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j + 32));
    any = _mm256_or_si256(any, _mm256_or_si256(lo, hi));
    const uint32_t zlo = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, zero)));
    const uint32_t zhi = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, zero)));
    words[q] = ~(static_cast<uint64_t>(zhi) << 32 | zlo);
    passes += _mm_popcnt_u64(words[q]);
  }
  uint8_t tail = 0;
  if (j < m) {
    // the last partial word in a 32- and a 16-byte step, then the last 16 bytes
    // of the row (overlapping bytes already seen: their bits are shifted out,
    // and a bad one among them was found already); a byte loop only for rows of
    // under 16 columns (a byte loop with its own value check used to cost more
    // than the whole rest of a short row)
    const int64_t r = m - j;
    uint64_t w = 0;
    int64_t k = 0;
    if (r >= 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j));
      any = _mm256_or_si256(any, v);
      w = static_cast<uint32_t>(~_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, zero)));
      k = 32;
    }
    const __m128i zero16 = _mm_setzero_si128();
    __m128i any16 = zero16;
    if (r - k >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j + k));
      any16 = _mm_or_si128(any16, v);
      w |= static_cast<uint64_t>(~_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero16)) & 0xFFFF) << k;
      k += 16;
    }
    const int64_t rest = r - k;
    if (rest > 0 && m >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + m - 16));
      any16 = _mm_or_si128(any16, v);
      const uint64_t b =
          static_cast<uint32_t>(~_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero16)) & 0xFFFF);
      w |= (b >> (16 - rest)) << k;
    } else {
      for (; k < r; ++k) {
        tail |= row[j + k];
        w |= static_cast<uint64_t>(row[j + k] != 0) << k;
      }
    }
    // 0xFE in a byte of any16 lands in tail's bits (a cast would leave the
    // upper half of a 256-bit register undefined)
    const __m128i hi16 = _mm_and_si128(any16, _mm_set1_epi8(static_cast<char>(0xFE)));
    if (!_mm_testz_si128(hi16, hi16)) tail |= 0xFE;
    words[q] = w;
    passes += _mm_popcnt_u64(w);
  }
  if (high) {
    const __m256i mask = _mm256_set1_epi8(static_cast<char>(0xFE));
    if (!_mm256_testz_si256(any, mask) || (tail & 0xFE)) *high = 1;
  }
  return passes;
}

// The row scores of RowsDot for 8R rows as lanes: each 64-column word of eight
// rows is gathered into one vector (the rows' word offsets off[0 .. 8R)), and
// each of its nibbles indexes the group's 16-entry table, two registers, through
// one two-table permute (which reads only the low four bits of every lane, so a
// shift per nibble is the whole index arithmetic).
template <int R>
ACES_FAST_AVX512BW void nibble_dot_avx512(const uint64_t* words, int64_t nw, int64_t G,
                                          const int64_t* off, const double* T, double* out) {
  __m512i vo[R];
  __m512d acc[R];
  for (int r = 0; r < R; ++r) {
    vo[r] = _mm512_loadu_si512(off + 8 * r);
    acc[r] = _mm512_setzero_pd();
  }
  ahead::Lines* const pf = ahead::pending();
  for (int64_t q = 0; q < nw; ++q) {
    if (pf) pf->tick(2 * R);  // a line per four rows and word
    const double* Tq = T + 256 * q;
    const int64_t ng = std::min<int64_t>(16, G - 16 * q);
    __m512i x[R];
    __m512d part[R];
    {
      const __m512d lo = _mm512_loadu_pd(Tq), hi = _mm512_loadu_pd(Tq + 8);
      for (int r = 0; r < R; ++r) {
        x[r] = _mm512_i64gather_epi64(vo[r], static_cast<const void*>(words + q), 8);
        part[r] = _mm512_permutex2var_pd(lo, x[r], hi);
      }
    }
    for (int64_t t = 1; t < ng; ++t) {
      const __m512d lo = _mm512_loadu_pd(Tq + 16 * t), hi = _mm512_loadu_pd(Tq + 16 * t + 8);
      for (int r = 0; r < R; ++r) {
        x[r] = _mm512_srli_epi64(x[r], 4);
        part[r] = _mm512_add_pd(part[r], _mm512_permutex2var_pd(lo, x[r], hi));
      }
    }
    for (int r = 0; r < R; ++r) acc[r] = _mm512_add_pd(acc[r], part[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_pd(out + 8 * r, acc[r]);
}

ACES_FAST_AVX512BW void rows_dot_avx512(const uint64_t* words, int64_t m, const int64_t* rows,
                                        int64_t nrows, const double* T, double* out) {
  const int64_t nw = (m + 63) / 64, G = (m + 3) / 4;
  alignas(64) int64_t off[32];
  int64_t k = 0;
  for (; k + 32 <= nrows; k += 32) {
    for (int l = 0; l < 32; ++l) off[l] = rows[k + l] * nw;
    nibble_dot_avx512<4>(words, nw, G, off, T, out + k);
  }
  for (; k < nrows; k += 8) {
    // a last block of fewer than eight rows repeats its last row in the spare lanes
    const int64_t cnt = std::min<int64_t>(8, nrows - k);
    for (int64_t l = 0; l < 8; ++l) off[l] = rows[k + std::min(l, cnt - 1)] * nw;
    alignas(64) double tmp[8];
    nibble_dot_avx512<1>(words, nw, G, off, T, tmp);
    for (int64_t l = 0; l < cnt; ++l) out[k + l] = tmp[l];
  }
}

// ---- counts of smaller keys (the rank sort of short score lists) -------------

// less[i] = #{j : hi(key[j]) < hi(key[i])}, hi the high 32 bits, for up to four
// blocks of sixteen keys, each count in a lane: every key's high half
// broadcast once (straight from memory) and compared with all of them, one
// compare and one masked add per block and key. The last block's lanes past d
// are masked off at load and store: nothing past key[d - 1] or less[d - 1].
template <int NB>
__attribute__((target("avx512f"), always_inline)) inline void less_blocks_avx512(
    const uint64_t* key, int64_t d, int64_t i0, int32_t* less) {
  const __m512i one = _mm512_set1_epi32(1);
  __m512i K[NB], C[NB];
  __mmask16 live[NB];
  for (int v = 0; v < NB; ++v) {
    const int64_t left = d - i0 - 16 * v;
    live[v] = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
    const uint64_t* p = key + i0 + 16 * v;
    const __m512i lo8 = _mm512_maskz_loadu_epi64(static_cast<__mmask8>(live[v]), p);
    const __m512i hi8 = _mm512_maskz_loadu_epi64(static_cast<__mmask8>(live[v] >> 8), p + 8);
    K[v] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(lo8, 32))),
        _mm512_cvtepi64_epi32(_mm512_srli_epi64(hi8, 32)), 1);
    C[v] = _mm512_setzero_si512();
  }
  const char* bytes = reinterpret_cast<const char*>(key);
  for (int64_t j = 0; j < d; ++j) {
    uint32_t h;  // the high half of key[j] (little-endian x86: its bytes 4..7)
    std::memcpy(&h, bytes + 8 * j + 4, sizeof h);
    const __m512i b = _mm512_set1_epi32(static_cast<int32_t>(h));
    for (int v = 0; v < NB; ++v)
      C[v] = _mm512_mask_add_epi32(C[v], _mm512_cmplt_epu32_mask(b, K[v]), C[v], one);
  }
  for (int v = 0; v < NB; ++v) _mm512_mask_storeu_epi32(less + i0 + 16 * v, live[v], C[v]);
}

__attribute__((target("avx512f"))) void less_counts_avx512(const uint64_t* key, int64_t d,
                                                           int32_t* less) {
  int64_t i0 = 0;
  for (; d - i0 > 48; i0 += 64) less_blocks_avx512<4>(key, d, i0, less);  // 49..64+ keys left
  if (d - i0 > 32)
    less_blocks_avx512<3>(key, d, i0, less);
  else if (d - i0 > 16)
    less_blocks_avx512<2>(key, d, i0, less);
  else if (d - i0 > 0)
    less_blocks_avx512<1>(key, d, i0, less);
}

// less_counts in AVX2's eight 32-bit lanes: the high halves, sign-flipped once
// into h (AVX2 compares signed only), then for every key j one broadcast, and
// per block of eight one compare and one subtract (a true compare is -1).
template <int NB>
ACES_FAST_AVX2 void less_blocks_avx2(const int32_t* h, int64_t d, int64_t i0, int32_t* less) {
  __m256i K[NB], C[NB];
  for (int v = 0; v < NB; ++v) {
    K[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i0 + 8 * v));
    C[v] = _mm256_setzero_si256();
  }
  for (int64_t j = 0; j < d; ++j) {
    const __m256i b = _mm256_set1_epi32(h[j]);
    for (int v = 0; v < NB; ++v) C[v] = _mm256_sub_epi32(C[v], _mm256_cmpgt_epi32(K[v], b));
  }
  for (int v = 0; v < NB; ++v) {
    const int64_t left = d - i0 - 8 * v;
    if (left >= 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(less + i0 + 8 * v), C[v]);
    } else if (left > 0) {  // nothing past less[d - 1]
      alignas(32) int32_t tmp[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), C[v]);
      std::memcpy(less + i0 + 8 * v, tmp, static_cast<size_t>(left) * sizeof(int32_t));
    }
  }
}

__attribute__((target("avx2"))) void less_counts_avx2(const uint64_t* key, int64_t d,
                                                      int32_t* less) {
  // lanes past d in the last block compare zeros; their counts are not stored
  alignas(32) int32_t h[kLessCountsMax + 8];
  for (int64_t j = 0; j < d; ++j)
    h[j] = static_cast<int32_t>(static_cast<uint32_t>(key[j] >> 32) ^ 0x80000000u);
  for (int64_t j = d; j < ((d + 7) & ~int64_t(7)); ++j) h[j] = 0;
  int64_t i0 = 0;
  for (; d - i0 > 24; i0 += 32) less_blocks_avx2<4>(h, d, i0, less);  // 25..32+ keys left
  if (d - i0 > 16)
    less_blocks_avx2<3>(h, d, i0, less);
  else if (d - i0 > 8)
    less_blocks_avx2<2>(h, d, i0, less);
  else if (d - i0 > 0)
    less_blocks_avx2<1>(h, d, i0, less);
}

#endif  // ACES_FAST_X86_SIMD

}  // namespace

UniformLevelStep uniform_level_step() {
#if ACES_FAST_X86_SIMD
  static const UniformLevelStep f = simd::pick<UniformLevelStep>({nullptr, step_avx2, step_avx512});
  return f;
#else
  return nullptr;
#endif
}

UniformBlock uniform_block_kernel(uint32_t tot) {
#if ACES_FAST_X86_SIMD
  static const UniformBlock f = simd::pick<UniformBlock>({nullptr, nullptr, uniform_block_avx512});
  if (f == nullptr && tot <= kMaxTot16 && simd::level() == simd::kAvx2) return uniform_block16_avx2;
  return f;
#else
  (void)tot;
  return nullptr;
#endif
}

UniformBlockWords uniform_block_words_kernel(uint32_t tot) {
#if ACES_FAST_X86_SIMD
  // Only where 16-bit lanes count: the rule for row dedup of ACES-C
  // (dedup_pays_for_aces_c) was measured there.
  if (tot <= kMaxTot16 && simd::level() == simd::kAvx512) return uniform_block_words_avx512;
  if (tot <= kMaxTot16 && simd::level() == simd::kAvx2) return uniform_block16_words_avx2;
#else
  (void)tot;
#endif
  return nullptr;
}

namespace {

void count_rows_portable(const uint64_t* words, int64_t n, int64_t nw, const uint64_t* mask,
                         int64_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (!mask) {
      out[i] = bits::count_words(words + i * nw, nw);
      continue;
    }
    int64_t c = 0;
    for (int64_t q = 0; q < nw; ++q) c += bits::popcount64(words[i * nw + q] & mask[q]);
    out[i] = c;
  }
}

#if ACES_FAST_X86_SIMD
// A baseline build counts bits in SWAR (bits::popcount64): a dozen operations
// a word: about 5% of a 100x50 ACES-C task ranked from packed rows.
__attribute__((target("popcnt"))) void count_rows_popcnt(const uint64_t* words, int64_t n,
                                                         int64_t nw, const uint64_t* mask,
                                                         int64_t* out) {
  if (nw == 1) {  // rows of up to 64 tests (the stream's 100x50): no inner loop
    const uint64_t m0 = mask ? mask[0] : ~uint64_t(0);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(_mm_popcnt_u64(words[i] & m0));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = 0;
    if (mask)
      for (int64_t q = 0; q < nw; ++q)
        c += static_cast<int64_t>(_mm_popcnt_u64(words[i * nw + q] & mask[q]));
    else
      for (int64_t q = 0; q < nw; ++q) c += static_cast<int64_t>(_mm_popcnt_u64(words[i * nw + q]));
    out[i] = c;
  }
}
#endif

}  // namespace

CountRows count_rows_kernel() {
#if ACES_FAST_X86_SIMD
  static const CountRows f =
      simd::pick<CountRows>({count_rows_portable, count_rows_popcnt, count_rows_popcnt});
  return f;
#else
  return count_rows_portable;
#endif
}

PackRow pack_row_kernel() {
#if ACES_FAST_X86_SIMD
  static const PackRow f = simd::pick<PackRow>({pack_row_portable, pack_row_avx2, pack_row_avx512});
  return f;
#else
  return pack_row_portable;
#endif
}

namespace {

// One group's 16 entries from its weights x[0..3]: the first four (+0.0, then
// +0.0 + x0, +0.0 + x1, (+0.0 + x0) + x1), and each further quarter that four
// plus x2, plus x3, plus x2 then x3: the adds of the definition (simd.hpp),
// four lanes at a time.
ACES_FAST_KERNEL_BODY void nibble_group(const double* x, double* __restrict t) {
  double lo[4];
  lo[0] = 0.0;
  lo[1] = 0.0 + x[0];
  lo[2] = 0.0 + x[1];
  lo[3] = lo[1] + x[1];
  for (int b = 0; b < 4; ++b) {
    const double with2 = lo[b] + x[2];
    t[b] = lo[b];
    t[4 + b] = with2;
    t[8 + b] = lo[b] + x[3];
    t[12 + b] = with2 + x[3];
  }
}

// Built one group at a time. The entry-by-entry loop was 5.6% of a batch of
// 24x100 ACES-C tasks (tables for 25 groups, read by 24 rows).
template <class Group>
ACES_FAST_KERNEL_BODY void nibble_tables_with(const double* w, int64_t m, double* T, Group group) {
  const int64_t G = (m + 3) / 4, full = m / 4;
  ahead::Lines* const pf = ahead::pending();
  for (int64_t g = 0; g < full; ++g) {
    if (pf) pf->tick(1);
    group(w + 4 * g, T + 16 * g);
  }
  if (full < G) {
    if (pf) pf->tick(1);
    double x[4];
    for (int64_t h = 0; h < 4; ++h) x[h] = 4 * full + h < m ? w[4 * full + h] : 0.0;
    group(x, T + 16 * full);
  }
}

void nibble_tables_portable(const double* w, int64_t m, double* T) {
  nibble_tables_with(w, m, T, nibble_group);
}

#if ACES_FAST_X86_SIMD
// nibble_group's adds as three vector adds (GCC left them scalar).
__attribute__((target("avx2"))) void nibble_tables_avx2(const double* w, int64_t m, double* T) {
  nibble_tables_with(w, m, T, [](const double* x, double* t) __attribute__((target("avx2"))) {
    const double x0 = 0.0 + x[0];
    const __m256d lo = _mm256_set_pd(x0 + x[1], 0.0 + x[1], x0, 0.0);
    const __m256d with2 = _mm256_add_pd(lo, _mm256_set1_pd(x[2]));
    const __m256d x3 = _mm256_set1_pd(x[3]);
    _mm256_storeu_pd(t, lo);
    _mm256_storeu_pd(t + 4, with2);
    _mm256_storeu_pd(t + 8, _mm256_add_pd(lo, x3));
    _mm256_storeu_pd(t + 12, _mm256_add_pd(with2, x3));
  });
}
#endif

using NibbleTables = void (*)(const double*, int64_t, double*);

ACES_FAST_KERNEL_BODY double sum32_body(const double* __restrict x, int64_t m) {
  double part[32] = {};
  int64_t j = 0;
  for (; j + 32 <= m; j += 32)
    for (int l = 0; l < 32; ++l) part[l] += x[j + l];
  for (int l = 0; j + l < m; ++l) part[l] += x[j + l];
  for (int h = 16; h >= 1; h >>= 1)
    for (int l = 0; l < h; ++l) part[l] += part[l + h];
  return part[0];
}

#if ACES_FAST_X86_SIMD
// sum32_body's adds with the partials in eight registers: compiled from the
// body, the partials lived in memory (the tail indexes them), zeroed by a `rep
// stos` whose start-up alone was a quarter of the sum's time on an EPYC; two
// sums of 100 weights were 3.3% of a batch of 24x100 ACES-C tasks. A tail lane
// past m adds +0.0, which leaves its partial as it is: a partial starts at
// +0.0 and so is never -0.0.
__attribute__((target("avx2"))) double sum32_avx2(const double* x, int64_t m) {
  __m256d p[8];
  for (int k = 0; k < 8; ++k) p[k] = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 32 <= m; j += 32)
    for (int k = 0; k < 8; ++k) p[k] = _mm256_add_pd(p[k], _mm256_loadu_pd(x + j + 4 * k));
  const int64_t rest = m - j;
  for (int k = 0; k < 8 && 4 * k < rest; ++k) {
    const int64_t left = rest - 4 * k;
    const __m256i lanes = _mm256_set_epi64x(3, 2, 1, 0);
    const __m256d v = left >= 4
                          ? _mm256_loadu_pd(x + j + 4 * k)
                          : _mm256_maskload_pd(x + j + 4 * k,
                                               _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), lanes));
    p[k] = _mm256_add_pd(p[k], v);
  }
  for (int k = 0; k < 4; ++k) p[k] = _mm256_add_pd(p[k], p[k + 4]);  // h = 16
  p[0] = _mm256_add_pd(p[0], p[2]);                                  // h = 8
  p[1] = _mm256_add_pd(p[1], p[3]);
  p[0] = _mm256_add_pd(p[0], p[1]);  // h = 4
  const __m128d two =
      _mm_add_pd(_mm256_castpd256_pd128(p[0]), _mm256_extractf128_pd(p[0], 1));  // h = 2
  return _mm_cvtsd_f64(_mm_add_sd(two, _mm_unpackhi_pd(two, two)));              // h = 1
}
#endif

using Sum32 = double (*)(const double*, int64_t);

}  // namespace

double sum32(const double* x, int64_t m) {
#if ACES_FAST_X86_SIMD
  static const Sum32 f =
      simd::pick<Sum32>({simd::Compiled<&sum32_body>::portable, sum32_avx2, sum32_avx2});
#else
  static const Sum32 f = simd::Compiled<&sum32_body>::portable;
#endif
  return f(x, m);
}

void nibble_tables(const double* w, int64_t m, double* T) {
#if ACES_FAST_X86_SIMD
  static const NibbleTables f =
      simd::pick<NibbleTables>({nibble_tables_portable, nibble_tables_avx2, nibble_tables_avx2});
#else
  static const NibbleTables f = nibble_tables_portable;
#endif
  f(w, m, T);
}

RowsDot rows_dot_kernel() {
#if ACES_FAST_X86_SIMD
  static const RowsDot f =
      simd::pick<RowsDot>({rows_dot_portable, rows_dot_portable, rows_dot_avx512});
  return f;
#else
  return rows_dot_portable;
#endif
}

LessCounts less_counts_kernel() {
#if ACES_FAST_X86_SIMD
  static const LessCounts f =
      simd::pick<LessCounts>({nullptr, less_counts_avx2, less_counts_avx512});
  return f;
#else
  return nullptr;
#endif
}

uint8_t max_byte(const uint8_t* p, int64_t len) {
  return simd::kernel<&max_byte_body, simd::kAvx2>()(p, len);
}

}  // namespace aces_fast
