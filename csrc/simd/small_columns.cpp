// The per-column surrogate kernel in registers (see small_columns.hpp).
//
// A column's inner rows are permuted out of the row vectors by its index lists
// (no gather, no store-to-load round trip), stay in registers across the outer
// loop, the eight-lane sums of eight outer rows are reduced together (the same
// tree per row as hsum8), and the column's share of v is permuted back onto the
// rows and added in registers. Column by column this performs exactly the
// operations of the generic kernel in the same order:
//   t = (E_o g) x_i, sigma = 1 / (1 + t), sigma' = (t sigma) sigma,
//   per outer row: hsum8 of the lane sums over the inner vectors of c_i sigma
//   and c_i sigma' (lane = inner position mod 8), then the sequential sums over
//   outer rows of c_o * those; per inner row the sequential sum over outer rows
//   of c_o sigma'; padding lanes x = 0, c = 0 (with unit multiplicities a masked
//   add skips them: adding c sigma = 0 would not change the sum either).
#include "simd/small_columns.hpp"

#include "portable.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "simd/dispatch.hpp"

#if ACES_FAST_X86_SIMD
#include <immintrin.h>
// GCC 12's masked intrinsics trip a false -Wmaybe-uninitialized (their undefined
// pass-through operand), as in simd.cpp.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define ACES_FAST_AVX512_FN __attribute__((target("avx512f,avx512bw,avx512vl")))
#endif

namespace aces_fast {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

void small_lists(uint32_t pb, int ne, uint8_t* out) {
  std::fill(out, out + kSmallList, uint8_t(0));
  const int P = portable::popcount32(pb);
  const bool pout = P <= ne - P;
  int no = 0, ni = 0;
  for (int r = 0; r < ne; ++r) {
    const bool pass = (pb >> r) & 1u;
    if (pass == pout) {
      out[32 + no] = static_cast<uint8_t>(r);
      out[48 + r] = static_cast<uint8_t>(no++);
    } else {
      out[ni] = static_cast<uint8_t>(r);
      out[48 + r] = static_cast<uint8_t>(ni++);
    }
  }
}

namespace {

#if ACES_FAST_X86_SIMD
// hsum8 (((v0+v1)+(v2+v3))+((v4+v5)+(v6+v7))) of the eight vectors x[0..7] at once:
// lane o of the result is hsum8(x[o]), every sum formed exactly as in hsum8.
ACES_FAST_AVX512_FN inline __m512d hsum8x8(const __m512d* x) {
  __m512d a[4], b[2];
  for (int k = 0; k < 4; ++k)
    a[k] = _mm512_add_pd(_mm512_unpacklo_pd(x[2 * k], x[2 * k + 1]),
                         _mm512_unpackhi_pd(x[2 * k], x[2 * k + 1]));
  for (int k = 0; k < 2; ++k)
    b[k] = _mm512_add_pd(_mm512_shuffle_f64x2(a[2 * k], a[2 * k + 1], 0x88),
                         _mm512_shuffle_f64x2(a[2 * k], a[2 * k + 1], 0xDD));
  return _mm512_add_pd(_mm512_shuffle_f64x2(b[0], b[1], 0x88),
                       _mm512_shuffle_f64x2(b[0], b[1], 0xDD));
}

// Lanes idx (0..8 NT - 1) of the table t[0..NT-1] (NT = 1..4 vectors).
template <int NT>
ACES_FAST_AVX512_FN inline __m512d lookup(const __m512d* t, __m512i idx) {
  if constexpr (NT == 1) {
    return _mm512_permutexvar_pd(idx, t[0]);
  } else if constexpr (NT == 2) {
    return _mm512_permutex2var_pd(t[0], idx, t[1]);
  } else {
    const __m512d lo = _mm512_permutex2var_pd(t[0], idx, t[1]);
    const __m512d hi = _mm512_permutex2var_pd(t[2], idx, NT == 4 ? t[3] : t[2]);
    return _mm512_mask_blend_pd(_mm512_test_epi64_mask(idx, _mm512_set1_epi64(16)), lo, hi);
  }
}

ACES_FAST_AVX512_FN inline __m512i bytes8(const uint8_t* p) {
  return _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Per-column results of the pair loop, kept until the column's sums are formed
// (the chains of sequential sums of several columns then overlap).
struct alignas(64) SmallColumnScratch {
  double s1[16];  // hsum8 of sum_i c_i sigma per outer row
  double od[16];  // hsum8 of sum_i c_i sigma' per outer row
  double ia[32];  // per inner row: sum over outer rows of c_o sigma'
  int no;
  bool pout, active;
};

// The pair loop of one column; NV = inner vectors (ni8 / 8), NVK = row vectors
// (ceil(ne / 8)).
template <int NV, int NVK, bool kUnit>
ACES_FAST_AVX512_FN inline void small_column_pairs(double g, int no, int ni, const uint8_t* lists,
                                                   const double* Eo, const double* cnt,
                                                   const __m512d* Iv, const __m512d* Cv,
                                                   bool want_v, SmallColumnScratch& o) {
  const __m512d one = _mm512_set1_pd(1.0);
  // lanes of the last inner vector that hold a row: the others hold x = 0 (and
  // count 0), the padding of pair_block_fast
  const __mmask8 last = static_cast<__mmask8>(0xFFu >> ((8 * NV - ni) & 7));
  __m512d X[NV], CC[NV], acc[NV];
  for (int v = 0; v < NV; ++v) {
    const __m512i idx = bytes8(lists + 8 * v);
    const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xFF);
    X[v] = _mm512_maskz_mov_pd(m, lookup<NVK>(Iv, idx));
    CC[v] = kUnit ? one : _mm512_maskz_mov_pd(m, lookup<NVK>(Cv, idx));
    acc[v] = _mm512_setzero_pd();
  }
  const uint8_t* orow = lists + 32;
  for (int o0 = 0; o0 < no; o0 += 8) {
    const int nb = std::min(8, no - o0);
    __m512d P1[8], P2[8];
    for (int b = 0; b < 8; ++b) {  // unrolled: P1, P2 stay in registers
      __m512d p1 = _mm512_setzero_pd(), p2 = _mm512_setzero_pd();
      if (b < nb) {
        const int r = orow[o0 + b];
        const __m512d av = _mm512_set1_pd(Eo[r] * g);
        const __m512d co = kUnit ? one : _mm512_set1_pd(cnt[r]);
        for (int v = 0; v < NV; ++v) {
          const __m512d t = _mm512_mul_pd(av, X[v]);
          const __m512d sg = _mm512_div_pd(one, _mm512_add_pd(one, t));
          const __m512d d = _mm512_mul_pd(_mm512_mul_pd(t, sg), sg);
          if (kUnit) {
            p1 = v == NV - 1 ? _mm512_mask_add_pd(p1, last, p1, sg) : _mm512_add_pd(p1, sg);
            p2 = _mm512_add_pd(p2, d);
            acc[v] = _mm512_add_pd(acc[v], d);
          } else {
            p1 = _mm512_add_pd(p1, _mm512_mul_pd(CC[v], sg));
            p2 = _mm512_add_pd(p2, _mm512_mul_pd(CC[v], d));
            acc[v] = _mm512_add_pd(acc[v], _mm512_mul_pd(co, d));
          }
        }
      }
      P1[b] = p1;
      P2[b] = p2;
    }
    _mm512_store_pd(o.s1 + o0, hsum8x8(P1));
    _mm512_store_pd(o.od + o0, hsum8x8(P2));
  }
  if (want_v)
    for (int v = 0; v < NV; ++v) _mm512_store_pd(o.ia + 8 * v, acc[v]);
}

// Columns per batch of small_columns_impl (its pair loops run first, then the
// sequential sums of all of them, then their shares of v).
constexpr int kSmallBatch = 8;

template <int NVK, bool kUnit>
ACES_FAST_AVX512_FN void small_columns_impl(const SmallColumns& a, int64_t q0, int64_t q1,
                                            double* vb) {
  const int ne = a.ne;
  __m512d Ev[NVK], Fv[NVK], Cv[NVK], vbv[NVK];
  for (int k = 0; k < NVK; ++k) {
    Ev[k] = _mm512_loadu_pd(a.E + 8 * k);
    Fv[k] = _mm512_loadu_pd(a.F + 8 * k);
    Cv[k] = _mm512_loadu_pd(a.cnt + 8 * k);
    vbv[k] = _mm512_setzero_pd();
  }
  const bool want_v = vb != nullptr;
  SmallColumnScratch sc[kSmallBatch];
  for (int64_t b0 = q0; b0 < q1; b0 += kSmallBatch) {
    const int nq = static_cast<int>(std::min<int64_t>(kSmallBatch, q1 - b0));
    for (int k = 0; k < nq; ++k) {
      const int64_t q = b0 + k;
      SmallColumnScratch& o = sc[k];
      const int P = portable::popcount32(a.bits[q]);
      o.active = P > 0 && P < ne;
      if (!o.active) continue;
      o.pout = P <= ne - P;
      o.no = o.pout ? P : ne - P;
      const int ni = ne - o.no;
      const uint8_t* lists = a.lists + q * kSmallList;
      const double* Eo = o.pout ? a.E : a.F;
      const __m512d* Iv = o.pout ? Fv : Ev;
      const double g = a.G[q];
      switch ((ni + 7) / 8) {
        case 1:
          small_column_pairs<1, NVK, kUnit>(g, o.no, ni, lists, Eo, a.cnt, Iv, Cv, want_v, o);
          break;
        case 2:
          if constexpr (NVK >= 2)
            small_column_pairs<2, NVK, kUnit>(g, o.no, ni, lists, Eo, a.cnt, Iv, Cv, want_v, o);
          break;
        case 3:
          if constexpr (NVK >= 3)
            small_column_pairs<3, NVK, kUnit>(g, o.no, ni, lists, Eo, a.cnt, Iv, Cv, want_v, o);
          break;
        default:
          if constexpr (NVK >= 4)
            small_column_pairs<4, NVK, kUnit>(g, o.no, ni, lists, Eo, a.cnt, Iv, Cv, want_v, o);
          break;
      }
    }
    for (int k = 0; k < nq; ++k) {
      const int64_t q = b0 + k;
      const SmallColumnScratch& o = sc[k];
      if (!o.active) {
        a.L[q] = kNaN;
        a.D[q] = 0.0;
        a.c[q] = 0.0;
        continue;
      }
      double tot1 = 0.0, tot2 = 0.0;
      const double* orow_cnt = a.cnt;
      const uint8_t* orow = a.lists + q * kSmallList + 32;
      for (int b = 0; b < o.no; ++b) {
        if (kUnit) {
          tot1 += o.s1[b];
          tot2 += o.od[b];
        } else {
          const double co = orow_cnt[orow[b]];
          tot1 += co * o.s1[b];
          tot2 += co * o.od[b];
        }
      }
      const double pf = a.pf[q];
      a.L[q] = tot1 / pf;
      a.D[q] = tot2;
      a.c[q] = a.w[q] / pf;
    }
    if (!want_v) continue;
    for (int k = 0; k < nq; ++k) {
      const SmallColumnScratch& o = sc[k];
      if (!o.active) continue;
      const int64_t q = b0 + k;
      const double cq = a.c[q];
      const __m512d so = _mm512_set1_pd(o.pout ? cq : -cq);
      const uint32_t pb = a.bits[q];
      const uint32_t om = o.pout ? pb : ~pb;
      const __m512d od[2] = {_mm512_load_pd(o.od), _mm512_load_pd(o.od + 8)};
      const __m512d ia[4] = {_mm512_load_pd(o.ia), _mm512_load_pd(o.ia + 8),
                             _mm512_load_pd(o.ia + 16), _mm512_load_pd(o.ia + 24)};
      const uint8_t* pos = a.lists + q * kSmallList + 48;
      for (int r = 0; r < NVK; ++r) {
        const __mmask8 mo = static_cast<__mmask8>(om >> (8 * r));
        const __m512i idx = bytes8(pos + 8 * r);
        const __m512d ov = _mm512_permutex2var_pd(od[0], idx, od[1]);
        const __m512d iv = lookup<NVK>(ia, idx);
        // outer rows add so u, inner rows subtract it (rows past ne: never read)
        vbv[r] = _mm512_mask_add_pd(vbv[r], mo, vbv[r], _mm512_mul_pd(so, ov));
        vbv[r] =
            _mm512_mask_sub_pd(vbv[r], static_cast<__mmask8>(~mo), vbv[r], _mm512_mul_pd(so, iv));
      }
    }
  }
  if (want_v) {
    alignas(64) double tmp[8 * NVK];
    for (int k = 0; k < NVK; ++k) _mm512_store_pd(tmp + 8 * k, vbv[k]);
    for (int r = 0; r < ne; ++r) vb[r] = tmp[r];
  }
}

template <bool kUnit>
ACES_FAST_AVX512_FN void small_columns_rows(const SmallColumns& a, int64_t q0, int64_t q1,
                                            double* vb) {
  switch ((a.ne + 7) / 8) {
    case 1:
      small_columns_impl<1, kUnit>(a, q0, q1, vb);
      break;
    case 2:
      small_columns_impl<2, kUnit>(a, q0, q1, vb);
      break;
    case 3:
      small_columns_impl<3, kUnit>(a, q0, q1, vb);
      break;
    default:
      small_columns_impl<4, kUnit>(a, q0, q1, vb);
      break;
  }
}

ACES_FAST_AVX512_FN void small_columns_avx512(const SmallColumns& a, int64_t q0, int64_t q1,
                                              double* vb) {
  if (a.unit)
    small_columns_rows<true>(a, q0, q1, vb);
  else
    small_columns_rows<false>(a, q0, q1, vb);
}
#endif

}  // namespace

SmallColumnsFn small_columns_kernel() {
#if ACES_FAST_X86_SIMD
  static const SmallColumnsFn f =
      simd::pick<SmallColumnsFn>({nullptr, nullptr, small_columns_avx512});
  return f;
#else
  return nullptr;
#endif
}

}  // namespace aces_fast
