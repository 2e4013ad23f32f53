// Hand-written AVX2 and AVX-512 variants of two surrogate kernels
// (csrc/kernels/surrogate.cpp defines them and holds their portable variants,
// which fix the bits every variant returns).
#include "simd/surrogate_simd.hpp"

#include "simd/dispatch.hpp"

#if ACES_FAST_X86_SIMD
#include <immintrin.h>

#include "simd/simd.hpp"

namespace aces_fast {
namespace surrogate_simd {

#define ACES_FAST_AVX2_FN __attribute__((target("avx2")))

// hsum8 of the eight lanes lo = (v0..v3), hi = (v4..v7):
// ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)), each sum as hsum8 forms it.
ACES_FAST_AVX2_FN inline double hsum8_avx2(__m256d lo, __m256d hi) {
  const __m256d h = _mm256_hadd_pd(lo, hi);  // (v0+v1, v4+v5, v2+v3, v6+v7)
  const __m128d a = _mm256_castpd256_pd128(h), b = _mm256_extractf128_pd(h, 1);
  const __m128d s = _mm_add_pd(a, b);  // ((v0+v1)+(v2+v3), (v4+v5)+(v6+v7))
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// pair_block_fast_body at AVX2, the same operations in the same order, one
// outer row at a time (the acc update (acc + c0 d0) + c1 d1 of the generic
// two-row sweep is that sequence too). The generic body's eight-lane vectors are
// two registers each here, and its two-row sweep needs more than AVX2's sixteen:
// GCC spilled them to the stack, which made this kernel 4x its division bound.
ACES_FAST_AVX2_FN void pair_block_fast_avx2(const double* __restrict oa,
                                            const double* __restrict oc, double* __restrict od,
                                            int64_t no, const double* __restrict x,
                                            const double* __restrict ci, double* __restrict acc,
                                            int64_t ni8, double* sum_sig, double* sum_dsig) {
  const __m256d one = _mm256_set1_pd(1.0);
  double tot1 = 0.0, tot2 = 0.0;
  for (int64_t o = 0; o < no; ++o) {
    const double c0 = oc[o];
    const __m256d a0 = _mm256_set1_pd(oa[o]), vc0 = _mm256_set1_pd(c0);
    __m256d p1[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    __m256d p2[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    for (int64_t i = 0; i < ni8; i += 8) {
      for (int h = 0; h < 2; ++h) {
        const int64_t k = i + 4 * h;
        const __m256d xi = _mm256_loadu_pd(x + k);
        const __m256d cc = _mm256_loadu_pd(ci + k);
        const __m256d t = _mm256_mul_pd(a0, xi);
        const __m256d g = _mm256_div_pd(one, _mm256_add_pd(one, t));
        const __m256d d = _mm256_mul_pd(_mm256_mul_pd(t, g), g);
        p1[h] = _mm256_add_pd(p1[h], _mm256_mul_pd(cc, g));
        p2[h] = _mm256_add_pd(p2[h], _mm256_mul_pd(cc, d));
        _mm256_storeu_pd(acc + k, _mm256_add_pd(_mm256_loadu_pd(acc + k), _mm256_mul_pd(vc0, d)));
      }
    }
    const double s1 = hsum8_avx2(p1[0], p1[1]), s2 = hsum8_avx2(p2[0], p2[1]);
    tot1 += c0 * s1;
    tot2 += c0 * s2;
    od[o] = s2;
  }
  *sum_sig = tot1;
  *sum_dsig = tot2;
}

// masked_sums_portable with the bytes as AVX-512 lane masks: a masked add leaves a
// lane whose bit is clear as it is, where the portable variant adds +0.0 to it --
// the same value, as no partial sum is ever -0.0 (each starts at +0.0, and
// +0.0 + -0.0 = +0.0). So the same bits, in two instructions per group and k
// instead of six.
// Groups g0 .. g0 + NG - 1 (NG a constant, so that the sums stay in registers).
template <int NG>
__attribute__((target("avx512f"))) inline void masked_sums_groups_avx512(
    const uint8_t* __restrict gb, int64_t nk, const double* __restrict vals,
    double* __restrict out) {
  __m512d ev[NG], od[NG];
#pragma GCC unroll 4
  for (int b = 0; b < NG; ++b) ev[b] = od[b] = _mm512_setzero_pd();
  int64_t k = 0;
  for (; k + 2 <= nk; k += 2) {
    const __m512d v0 = _mm512_set1_pd(vals[k]), v1 = _mm512_set1_pd(vals[k + 1]);
#pragma GCC unroll 4
    for (int b = 0; b < NG; ++b) {
      ev[b] = _mm512_mask_add_pd(ev[b], static_cast<__mmask8>(gb[b * nk + k]), ev[b], v0);
      od[b] = _mm512_mask_add_pd(od[b], static_cast<__mmask8>(gb[b * nk + k + 1]), od[b], v1);
    }
  }
  if (k < nk) {
    const __m512d v0 = _mm512_set1_pd(vals[k]);
#pragma GCC unroll 4
    for (int b = 0; b < NG; ++b)
      ev[b] = _mm512_mask_add_pd(ev[b], static_cast<__mmask8>(gb[b * nk + k]), ev[b], v0);
  }
#pragma GCC unroll 4
  for (int b = 0; b < NG; ++b) _mm512_storeu_pd(out + 8 * b, _mm512_add_pd(ev[b], od[b]));
}

__attribute__((target("avx512f"))) void masked_sums_avx512(const uint8_t* __restrict bytes,
                                                           int64_t ng, int64_t nk,
                                                           const double* __restrict vals,
                                                           double* __restrict out) {
  int64_t g0 = 0;
  for (; g0 + 4 <= ng; g0 += 4)
    masked_sums_groups_avx512<4>(bytes + g0 * nk, nk, vals, out + 8 * g0);
  switch (ng - g0) {
    case 3:
      masked_sums_groups_avx512<3>(bytes + g0 * nk, nk, vals, out + 8 * g0);
      break;
    case 2:
      masked_sums_groups_avx512<2>(bytes + g0 * nk, nk, vals, out + 8 * g0);
      break;
    case 1:
      masked_sums_groups_avx512<1>(bytes + g0 * nk, nk, vals, out + 8 * g0);
      break;
    default:
      break;
  }
}

// masked_sums_portable at AVX2: a group's eight lanes are two registers, and the
// lanes of a byte's low and high four bits select their +-0.0 / value pattern
// from kLaneMask4, then the same and + add. Two groups per pass: their even and
// odd chains fill the sixteen registers.
ACES_FAST_AVX2_FN inline __m256d lanes4(unsigned bits4) {
  return _mm256_load_pd(reinterpret_cast<const double*>(kLaneMask4[bits4]));
}

// Step k of NG groups' chains acc (a lambda would not inherit the target).
template <int NG>
__attribute__((target("avx2"), always_inline)) inline void masked_step_avx2(
    const uint8_t* __restrict gb, int64_t nk, const double* __restrict vals, int64_t k,
    __m256d (*acc)[2]) {
  const __m256d v = _mm256_broadcast_sd(vals + k);
  for (int b = 0; b < NG; ++b) {
    const unsigned byte = gb[b * nk + k];
    acc[b][0] = _mm256_add_pd(acc[b][0], _mm256_and_pd(lanes4(byte & 15u), v));
    acc[b][1] = _mm256_add_pd(acc[b][1], _mm256_and_pd(lanes4(byte >> 4), v));
  }
}

template <int NG>
ACES_FAST_AVX2_FN inline void masked_sums_groups_avx2(const uint8_t* __restrict gb, int64_t nk,
                                                      const double* __restrict vals,
                                                      double* __restrict out) {
  __m256d ev[NG][2], od[NG][2];
  for (int b = 0; b < NG; ++b) ev[b][0] = ev[b][1] = od[b][0] = od[b][1] = _mm256_setzero_pd();
  int64_t k = 0;
  for (; k + 2 <= nk; k += 2) {
    masked_step_avx2<NG>(gb, nk, vals, k, ev);
    masked_step_avx2<NG>(gb, nk, vals, k + 1, od);
  }
  if (k < nk) masked_step_avx2<NG>(gb, nk, vals, k, ev);
  for (int b = 0; b < NG; ++b) {
    _mm256_storeu_pd(out + 8 * b, _mm256_add_pd(ev[b][0], od[b][0]));
    _mm256_storeu_pd(out + 8 * b + 4, _mm256_add_pd(ev[b][1], od[b][1]));
  }
}

ACES_FAST_AVX2_FN void masked_sums_avx2(const uint8_t* __restrict bytes, int64_t ng, int64_t nk,
                                        const double* __restrict vals, double* __restrict out) {
  int64_t g0 = 0;
  for (; g0 + 2 <= ng; g0 += 2) masked_sums_groups_avx2<2>(bytes + g0 * nk, nk, vals, out + 8 * g0);
  if (g0 < ng) masked_sums_groups_avx2<1>(bytes + g0 * nk, nk, vals, out + 8 * g0);
}

#undef ACES_FAST_AVX2_FN

}  // namespace surrogate_simd
}  // namespace aces_fast
#endif
