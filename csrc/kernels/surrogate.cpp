// Logistic surrogate of LOO-AUC, the ACES-O objective J and its analytic gradient
// (docs/contract.rst §3).
//
// For test j with passers P_j and failers F_j (rows with count > 0),
//   z_pf = gamma (s_p - s_f - w_j),  sigma_pf = sigma(z_pf),  sigma'_pf = sigma (1 - sigma),
//   L_j  = sum_pf c_p c_f sigma_pf / (|P_j| |F_j|),      |P_j| = sum_{p in P_j} c_p,
//   D_j  = sum_pf c_p c_f sigma'_pf,   c_j = w_j / (|P_j| |F_j|),
//   u^j_p = sum_f c_f sigma'_pf (p in P_j),  u^j_f = -sum_p c_p sigma'_pf (f in F_j),
//   v_i  = sum_j c_j u^j_i   (per distinct row),
//   dJ/dw_k = (L_k - 1/2) - gamma c_k D_k + gamma sum_i c_i B_ik v_i.
// This equals the gradient of the matrix with every row i repeated c_i times.
//
// Speed: exp(-z) = E_p F_f G_j with E_p = exp(-gamma (s_p - s0)),
// F_f = exp(gamma (s_f - s0)), G_j = exp(gamma w_j), so the pair loop needs no
// exp: t = E_p F_f G_j, sigma = 1/(1+t), sigma' = t sigma^2. Used while
// gamma (max s - min s + max w) <= 600 (no overflow/underflow to 0 possible);
// beyond that a per-pair two-branch sigmoid is used.
//
// Determinism: columns are split into a fixed number of chunks (depends only on
// the number of columns); each chunk accumulates its own partial v and the
// partials are summed in chunk order, so results do not depend on the number of
// threads.
#include "kernels/bits.hpp"
#include "kernels/interrupt.hpp"
#include "kernels/kernels.hpp"
#include "kernels/sigmoid.hpp"
#include "simd/dispatch.hpp"
#include "simd/lanes.hpp"
#include "simd/simd.hpp"
#include "simd/small_columns.hpp"
#include "simd/surrogate_simd.hpp"
#include "simd/vec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace aces_fast {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kFastSpanLimit = 600.0;
constexpr int64_t kMaxChunks = 64;
// Columns per chunk at least (fewer chunks on narrow problems: each chunk costs a
// kernel call and a partial v to set up and add).
constexpr int64_t kChunkColumns = 32;
// Columns per block of the row-pair kernel (a multiple of 8): the unit its
// threads share out, each with its own partial v.
constexpr int64_t kRowPairBlock = 512;
// Cost model choosing the kernel, in units of one row-pair sweep element (one
// pair of rows times one column). Changes speed only, never results within a
// kernel; the choice depends on the shape alone.
//  * More than kSmallRows kept rows (the generic per-column kernel): a sweep
//    costs kSweepOverhead plus its columns; a column kColumnOverhead +
//    kColumnPerRow * rows plus its padded pairs. Fitted to ACES-O runs on 8-48
//    rows x 100-1000 columns, pass rates 0.15 and 0.5.
//  * At most kSmallRows, when the sweeps cover at least kSmallModelWork
//    elements (the per-column kernel in registers, small_columns below): a
//    sweep costs kSmallSweepOverhead plus its columns; the columns
//    kSmallColumnsFixed plus, per column, kSmallColumnOverhead +
//    kSmallColumnPerVector * (outer rows) * (inner vectors). Fitted (relative
//    least squares, surrogate evaluations with gradient, AVX-512 variants) to
//    4-32 distinct rows x 20-1000 columns, pass rates 0.15-0.75, with and
//    without multiplicities: the choice is within 25% of the faster kernel on
//    that grid, for the AVX2 variants too. Smaller problems (a few us per
//    evaluation, where that model error exceeds the difference) keep the first
//    rule, so their results keep the bits they had before this kernel existed.
constexpr double kSweepOverhead = 24.0;
constexpr double kColumnOverhead = 150.0;
constexpr double kColumnPerRow = 2.6;
// Pair terms per evaluation from which the column and row-pair loops poll the
// interrupt token themselves (about a millisecond of work); below, the once per
// step poll of the Adam loop is soon enough.
constexpr double kPollPairWork = double(1 << 20);
// Pair terms per evaluation below which it runs on one thread (~100 us of work
// on one core). An ACES-O fit opens one parallel region per Adam step; on a busy
// machine a region waits for its slowest thread, and a thread the OS has
// preempted costs a scheduler time slice (milliseconds), so that regions of ~15 us
// (top_k = 24 at 500 tests) turned a 1.5 ms fit into 0.7 s. At this size the
// split still pays when both cores are free, and a preempted thread costs a
// fraction of the work, not hundreds of times it.
constexpr double kMinParallelPairWork = double(1 << 18);
constexpr int64_t kSmallRows = 32;
constexpr double kSmallModelWork = 16384.0;
constexpr double kSmallSweepOverhead = 2.6;
constexpr double kSmallColumnsFixed = 450.0;
constexpr double kSmallColumnOverhead = 50.0;
constexpr double kSmallColumnPerVector = 5.8;

// Kernel forced by ACES_FAST_SURROGATE_KERNEL (for tests): 1 rows, 0 columns, -1 auto.
int forced_kernel() {
  const char* e = std::getenv("ACES_FAST_SURROGATE_KERNEL");
  if (!e) return -1;
  if (std::strcmp(e, "rows") == 0) return 1;
  if (std::strcmp(e, "columns") == 0) return 0;
  return -1;
}

// All pairs of one column, fast form t = oa[o] * x[i]: for every outer o,
// od[o] = sum_i ci sigma' and (sum_sig, sum_dsig) += co * (sum_i ci sigma,
// sum_i ci sigma'); acc[i] += co sigma'. Callers pad the inner arrays to a
// multiple of 8 with x = 0, ci = 0 (adds exactly nothing). Each inner sum uses
// eight explicit lanes (i mod 8, simd/vec.hpp) combined as a fixed
// tree, so the portable (SSE2), AVX2 and AVX-512 variants round identically (no
// reassociation is left to the compiler; -ffp-contract=off rules out FMA).
// Two outer rows per sweep share the loads and the acc update. The pair loop is
// bound by the division, hence the AVX-512 variant (2x the lanes per divide).
// The three pair kernels are dispatched by simd/dispatch.hpp (their *_body
// compiled once per level).
using lanes::hsum8;
using lanes::load8;
using lanes::splat8;
using lanes::store8;
using lanes::v8d;
using lanes::v8l;

ACES_FAST_KERNEL_BODY void pair_block_fast_body(const double* __restrict oa,
                                                const double* __restrict oc, double* __restrict od,
                                                int64_t no, const double* __restrict x,
                                                const double* __restrict ci, double* __restrict acc,
                                                int64_t ni8, double* sum_sig, double* sum_dsig) {
  v8d one, zero;
  splat8(one, 1.0);
  splat8(zero, 0.0);
  double tot1 = 0.0, tot2 = 0.0;
  int64_t o = 0;
  for (; o + 2 <= no; o += 2) {
    const double c0 = oc[o], c1 = oc[o + 1];
    v8d a0, a1, vc0, vc1;
    splat8(a0, oa[o]);
    splat8(a1, oa[o + 1]);
    splat8(vc0, c0);
    splat8(vc1, c1);
    v8d p1 = zero, p2 = zero, q1 = zero, q2 = zero;
    for (int64_t i = 0; i < ni8; i += 8) {
      v8d xi, cc, ai;
      load8(xi, x + i);
      load8(cc, ci + i);
      load8(ai, acc + i);
      const v8d t0 = a0 * xi;
      const v8d g0 = one / (one + t0);
      const v8d d0 = t0 * g0 * g0;
      const v8d t1 = a1 * xi;
      const v8d g1 = one / (one + t1);
      const v8d d1 = t1 * g1 * g1;
      p1 += cc * g0;
      p2 += cc * d0;
      q1 += cc * g1;
      q2 += cc * d1;
      store8(acc + i, (ai + vc0 * d0) + vc1 * d1);
    }
    const double s1a = hsum8(p1), s2a = hsum8(p2), s1b = hsum8(q1), s2b = hsum8(q2);
    tot1 += c0 * s1a;
    tot2 += c0 * s2a;
    od[o] = s2a;
    tot1 += c1 * s1b;
    tot2 += c1 * s2b;
    od[o + 1] = s2b;
  }
  for (; o < no; ++o) {
    const double c0 = oc[o];
    v8d a0, vc0;
    splat8(a0, oa[o]);
    splat8(vc0, c0);
    v8d p1 = zero, p2 = zero;
    for (int64_t i = 0; i < ni8; i += 8) {
      v8d xi, cc, ai;
      load8(xi, x + i);
      load8(cc, ci + i);
      load8(ai, acc + i);
      const v8d t0 = a0 * xi;
      const v8d g0 = one / (one + t0);
      const v8d d0 = t0 * g0 * g0;
      p1 += cc * g0;
      p2 += cc * d0;
      store8(acc + i, ai + vc0 * d0);
    }
    const double s1a = hsum8(p1), s2a = hsum8(p2);
    tot1 += c0 * s1a;
    tot2 += c0 * s2a;
    od[o] = s2a;
  }
  *sum_sig = tot1;
  *sum_dsig = tot2;
}

// pair_block_fast_body for the baseline target (SSE2 on x86-64; NEON on ARM,
// where every kernel takes this variant): the same operations in the same
// order, one outer row at a time over two-lane vectors, so that the sums and
// constants fit in sixteen registers (the generic body's two-row sweep over
// eight-lane vectors did not: spilled, it ran at a quarter of its division bound).
typedef vec::v2d v2d_pair;

inline void load2(v2d_pair& v, const double* p) { std::memcpy(&v, p, sizeof v); }

void pair_block_fast_portable(const double* __restrict oa, const double* __restrict oc,
                              double* __restrict od, int64_t no, const double* __restrict x,
                              const double* __restrict ci, double* __restrict acc, int64_t ni8,
                              double* sum_sig, double* sum_dsig) {
  const v2d_pair one = {1.0, 1.0};
  double tot1 = 0.0, tot2 = 0.0;
  for (int64_t o = 0; o < no; ++o) {
    const double c0 = oc[o];
    const v2d_pair a0 = {oa[o], oa[o]}, vc0 = {c0, c0};
    // p[h] holds lanes 2h and 2h + 1 of the eight (inner position mod 8)
    v2d_pair p1[4] = {}, p2[4] = {};
    for (int64_t i = 0; i < ni8; i += 8) {
      for (int h = 0; h < 4; ++h) {
        const int64_t k = i + 2 * h;
        v2d_pair xi, cc, ai;
        load2(xi, x + k);
        load2(cc, ci + k);
        load2(ai, acc + k);
        const v2d_pair t = a0 * xi;
        const v2d_pair g = one / (one + t);
        const v2d_pair d = t * g * g;
        p1[h] += cc * g;
        p2[h] += cc * d;
        const v2d_pair an = ai + vc0 * d;
        std::memcpy(acc + k, &an, sizeof an);
      }
    }
    // hsum8: ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))
    const double s1 = ((p1[0][0] + p1[0][1]) + (p1[1][0] + p1[1][1])) +
                      ((p1[2][0] + p1[2][1]) + (p1[3][0] + p1[3][1]));
    const double s2 = ((p2[0][0] + p2[0][1]) + (p2[1][0] + p2[1][1])) +
                      ((p2[2][0] + p2[2][1]) + (p2[3][0] + p2[3][1]));
    tot1 += c0 * s1;
    tot2 += c0 * s2;
    od[o] = s2;
  }
  *sum_sig = tot1;
  *sum_dsig = tot2;
}

using PairBlockFastFn = void (*)(const double*, const double*, double*, int64_t, const double*,
                                 const double*, double*, int64_t, double*, double*);

// The generic body at AVX-512; hand-written for the baseline target and AVX2
// (csrc/simd/surrogate_simd.cpp).
void pair_block_fast(const double* oa, const double* oc, double* od, int64_t no, const double* x,
                     const double* ci, double* acc, int64_t ni8, double* sum_sig,
                     double* sum_dsig) {
#if ACES_FAST_X86_SIMD
  using C = simd::Compiled<&pair_block_fast_body>;
  static const PairBlockFastFn f = simd::pick<PairBlockFastFn>(
      {pair_block_fast_portable, surrogate_simd::pair_block_fast_avx2, C::avx512});
#else
  static const PairBlockFastFn f = pair_block_fast_portable;
#endif
  f(oa, oc, od, no, x, ci, acc, ni8, sum_sig, sum_dsig);
}

// The pairs of rows (p, q0) and (p, q1) over columns [0, n8) (n8 a multiple
// of 8) of the row-pair kernel, in one pass (shared loads). bp, bq: rows as
// 0.0 / 1.0, so x = bp - bq is +1 (p passes, q fails), -1 (the reverse) or 0
// (no passer-failer pair: masked by x^2 = 0). Per pair k, ab[3k..3k+2] =
// (alpha, beta, cpq) with alpha = E_p F_q, beta = E_q F_p, cpq = c_p c_q and
// t = exp(-z) = (x > 0 ? alpha : beta) G_j. Ls[j] += cpq sigma and
// Ds[j] += cpq sigma' (pair q0 first, then q1); r[k] = sum_j x_j cw_j sigma'_j
// (v_p += c_q r[k], v_q -= c_p r[k]). Vectorized across columns; r in eight
// fixed lanes (as pair_block_fast), so every variant rounds alike. Padded columns
// (G = 1, cw = 0, bp = bq = 0) and a pair with cpq = 0 add exact zeros.
ACES_FAST_KERNEL_BODY void pair_sweep2_body(const double* __restrict bp,
                                            const double* __restrict bq0,
                                            const double* __restrict bq1, const double* ab,
                                            const double* __restrict G, const double* __restrict cw,
                                            double* __restrict Ls, double* __restrict Ds,
                                            int64_t n8, double* r) {
  v8d one, zero, va0, vb0, vc0, va1, vb1, vc1;
  splat8(one, 1.0);
  splat8(zero, 0.0);
  splat8(va0, ab[0]);
  splat8(vb0, ab[1]);
  splat8(vc0, ab[2]);
  splat8(va1, ab[3]);
  splat8(vb1, ab[4]);
  splat8(vc1, ab[5]);
  v8d R0 = zero, R1 = zero;
  for (int64_t j = 0; j < n8; j += 8) {
    v8d xp, xq0, xq1, g, c, ls, ds;
    load8(xp, bp + j);
    load8(xq0, bq0 + j);
    load8(xq1, bq1 + j);
    load8(g, G + j);
    load8(c, cw + j);
    load8(ls, Ls + j);
    load8(ds, Ds + j);
    const v8d x0 = xp - xq0;
    const v8d x1 = xp - xq1;
    const v8d t0 = ACES_FAST_VSELECT(x0 > zero, va0, vb0) * g;
    const v8d t1 = ACES_FAST_VSELECT(x1 > zero, va1, vb1) * g;
    const v8d sg0 = one / (one + t0);
    const v8d sg1 = one / (one + t1);
    const v8d d0 = t0 * sg0 * sg0;
    const v8d d1 = t1 * sg1 * sg1;
    const v8d cx0 = vc0 * (x0 * x0);
    const v8d cx1 = vc1 * (x1 * x1);
    store8(Ls + j, (ls + cx0 * sg0) + cx1 * sg1);
    store8(Ds + j, (ds + cx0 * d0) + cx1 * d1);
    R0 += x0 * (c * d0);
    R1 += x1 * (c * d1);
  }
  r[0] = hsum8(R0);
  r[1] = hsum8(R1);
}

constexpr simd::Dispatched<&pair_sweep2_body, simd::kAvx512> pair_sweep2{};

// acc[j] += a * x[j], j < n (one multiply, one add each: same bits in every variant).
ACES_FAST_KERNEL_BODY void add_scaled_row_body(double* __restrict acc, const double* __restrict x,
                                               double a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += a * x[j];
}
constexpr simd::Dispatched<&add_scaled_row_body, simd::kAvx512> add_scaled_row{};

// out[8 g + l] = sum of vals[k] over the k < nk where bit l of bytes[g nk + k]
// is set, for every g < ng: the even k ascending plus the odd k ascending (two
// chains of additions each, so that their latency is not the bound; each partial
// starts at +0.0 and only the set bits add: the other lanes add +0.0, which
// changes no such sum). One pass per group of eight sums; the same bits in
// every variant (portable, AVX2, AVX-512). Used for the row scores (groups of
// rows, steps over columns) and for B^T (c v) (groups of columns, steps over
// rows).
//
// This variant (the baseline target: SSE2, NEON) holds a group's eight lanes as
// four two-lane vectors, each taking its +-0.0 / value pattern from a table by
// two bits of the byte (per-lane shifts have no SSE2 form).
alignas(16) const uint64_t kLanes2[4][2] = {{0, 0}, {~0ULL, 0}, {0, ~0ULL}, {~0ULL, ~0ULL}};

typedef vec::v2u v2u_mask;

void masked_sums_portable(const uint8_t* __restrict bytes, int64_t ng, int64_t nk,
                          const double* __restrict vals, double* __restrict out) {
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* gb = bytes + g * nk;
    v2d_pair ev[4] = {}, od[4] = {};
    const auto step = [&](v2d_pair* acc, int64_t k) {
      uint64_t vb;
      std::memcpy(&vb, vals + k, sizeof vb);
      const v2u_mask v = {vb, vb};
      const unsigned byte = gb[k];
      for (int h = 0; h < 4; ++h) {
        v2u_mask m;
        std::memcpy(&m, kLanes2[(byte >> (2 * h)) & 3u], sizeof m);
        acc[h] += ACES_FAST_VCAST(v2d_pair, v & m);
      }
    };
    int64_t k = 0;
    for (; k + 2 <= nk; k += 2) {
      step(ev, k);
      step(od, k + 1);
    }
    if (k < nk) step(ev, k);
    for (int h = 0; h < 4; ++h) {
      const v2d_pair r = ev[h] + od[h];
      std::memcpy(out + 8 * g + 2 * h, &r, sizeof r);
    }
  }
}

using MaskedSumsFn = void (*)(const uint8_t*, int64_t, int64_t, const double*, double*);

// Hand-written at every level, the same bits (masked_sums_portable defines them;
// AVX2 and AVX-512 in csrc/simd/surrogate_simd.cpp).
void masked_sums(const uint8_t* bytes, int64_t ng, int64_t nk, const double* vals, double* out) {
#if ACES_FAST_X86_SIMD
  static const MaskedSumsFn f = simd::pick<MaskedSumsFn>(
      {masked_sums_portable, surrogate_simd::masked_sums_avx2, surrogate_simd::masked_sums_avx512});
#else
  static const MaskedSumsFn f = masked_sums_portable;
#endif
  f(bytes, ng, nk, vals, out);
}

// Stable variant: z = sgn * (a - x[i]) computed explicitly.
inline void pairs_stable(double a, double sgn, double co, const double* __restrict x,
                         const double* __restrict ci, double* __restrict acc, int64_t ni,
                         double* sum_sig, double* sum_dsig) {
  double s1 = 0.0, s2 = 0.0;
  for (int64_t i = 0; i < ni; ++i) {
    double sg, d;
    sigmoid2(sgn * (a - x[i]), &sg, &d);
    s1 += ci[i] * sg;
    s2 += ci[i] * d;
    acc[i] += co * d;
  }
  *sum_sig = s1;
  *sum_dsig = s2;
}

}  // namespace

SurrogateWorkspace::SurrogateWorkspace(const uint8_t* B, int64_t n, int64_t m,
                                       const int64_t* counts, const int64_t* cols, int64_t n_cols,
                                       bool parallel, int n_threads) {
  nt_ = resolve_threads(parallel, n_threads);
  parallel_ = nt_ > 1;
  mc_ = cols ? n_cols : m;
  if (mc_ < 0) mc_ = 0;

  std::vector<int64_t> keep;
  keep.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i)
    if (!counts || counts[i] > 0) keep.push_back(i);
  ne_ = static_cast<int64_t>(keep.size());
  const size_t ne = static_cast<size_t>(ne_), mc = static_cast<size_t>(mc_);

  cnt_.resize(ne);
  for (size_t r = 0; r < ne; ++r) cnt_[r] = counts ? static_cast<double>(counts[keep[r]]) : 1.0;

  // Per column (rows ascending): passers then failers, their count-weighted
  // numbers (summed in row order), and the pass bits in the two layouts of
  // masked_sums: per group of eight kept rows over the columns (row scores), per
  // group of eight columns over the kept rows (B^T (c v)). Column by column:
  // the kept rows of B are read in place, a column's writes are contiguous.
  npass_.assign(mc, 0);
  pw_.assign(mc, 0.0);
  fw_.assign(mc, 0.0);
  idx_.resize(mc * ne);
  ngr_ = (ne_ + 7) / 8;
  ngc_ = (mc_ + 7) / 8;
  rbytes_.assign(static_cast<size_t>(ngr_) * mc, 0);
  cbytes_.assign(static_cast<size_t>(ngc_) * ne, 0);
  {
    std::vector<const uint8_t*> rowp(ne);
    for (size_t r = 0; r < ne; ++r) rowp[r] = B + keep[r] * m;
    std::vector<int32_t> fail(ne);
    for (size_t q = 0; q < mc; ++q) {
      const int64_t j = cols ? cols[q] : static_cast<int64_t>(q);
      int32_t* pi = idx_.data() + q * ne;
      int64_t np = 0, nf = 0;
      double pw = 0.0, fw = 0.0;
      for (size_t r = 0; r < ne; ++r) {
        if (rowp[r][j]) {
          pw += cnt_[r];
          pi[np++] = static_cast<int32_t>(r);
          rbytes_[(r / 8) * mc + q] |= static_cast<uint8_t>(1u << (r % 8));
          cbytes_[(q / 8) * ne + r] |= static_cast<uint8_t>(1u << (q % 8));
        } else {
          fw += cnt_[r];
          fail[nf++] = static_cast<int32_t>(r);
        }
      }
      std::copy(fail.begin(), fail.begin() + nf, pi + np);
      npass_[q] = np;
      pw_[q] = pw;
      fw_[q] = fw;
    }
  }

  // Use threads only when there is enough pair work to pay for a parallel region.
  double pair_work = 0.0;
  for (size_t q = 0; q < mc; ++q)
    pair_work += static_cast<double>(npass_[q]) * static_cast<double>(ne_ - npass_[q]);
  if (pair_work + static_cast<double>(ne_) * static_cast<double>(mc_) < kMinParallelPairWork)
    parallel_ = false;
  poll_ = pair_work >= kPollPairWork;

  // Row pairs or columns: from the shape alone (see kernels.hpp).
  {
    const int64_t mp = (mc_ + 7) & ~int64_t(7);
    const int64_t nrb = (mp + kRowPairBlock - 1) / kRowPairBlock;
    const double npairs = 0.5 * static_cast<double>(ne_) * static_cast<double>(ne_ - 1);
    const bool small = ne_ <= kSmallRows && npairs * static_cast<double>(mp) >= kSmallModelWork;
    double col_cost = small ? kSmallColumnsFixed : 0.0;
    for (size_t q = 0; q < mc; ++q) {
      const int64_t P = npass_[q], F = ne_ - P;
      if (P == 0 || F == 0) continue;
      const int64_t no = std::min(P, F), ni = std::max(P, F);
      if (small)
        col_cost += kSmallColumnOverhead + kSmallColumnPerVector * static_cast<double>(no) *
                                               static_cast<double>((ni + 7) / 8);
      else
        col_cost += kColumnOverhead + kColumnPerRow * static_cast<double>(ne_) +
                    static_cast<double>(no) * static_cast<double>((ni + 7) & ~int64_t(7));
    }
    const double row_cost =
        npairs * (static_cast<double>(mp) +
                  (small ? kSmallSweepOverhead : kSweepOverhead) * static_cast<double>(nrb));
    const int forced = forced_kernel();
    rows_ = ne_ >= 2 && mc_ > 0 && (forced >= 0 ? forced == 1 : row_cost <= col_cost);
    if (rows_) {
      mp_ = mp;
      nrb_ = nrb;
      const size_t mps = static_cast<size_t>(mp);
      xb_.assign((ne + 1) * mps, 0.0);  // row ne stays 0: see row_pair_eval
      for (size_t r = 0; r < ne; ++r) {
        const uint8_t* row = B + keep[r] * m;
        double* xr = xb_.data() + r * mps;
        for (size_t q = 0; q < mc; ++q)
          xr[q] = row[cols ? cols[q] : static_cast<int64_t>(q)] ? 1.0 : 0.0;
      }
      pf_.assign(mps, 0.0);
      for (size_t q = 0; q < mc; ++q) pf_[q] = pw_[q] * fw_[q];
      Gp_.assign(mps, 1.0);
      cw_.assign(mps, 0.0);
      Ls_.assign(mps, 0.0);
      Ds_.assign(mps, 0.0);
      bv_.assign(mps, 0.0);
      rvbuf_.assign(static_cast<size_t>(nrb) * ne, 0.0);
    }
  }

  if (ne_ >= 2 && ne_ <= kSmallRows) {
    sbits_.assign(mc, 0u);
    slists_.resize(mc * kSmallList);
    spf_.resize(mc);
    for (size_t q = 0; q < mc; ++q) {
      const int32_t* pi = idx_.data() + q * ne;
      for (int64_t k = 0; k < npass_[q]; ++k) sbits_[q] |= 1u << pi[k];
      small_lists(sbits_[q], static_cast<int>(ne_), slists_.data() + q * kSmallList);
      spf_[q] = pw_[q] * fw_[q];
    }
    sunit_ = true;
    for (size_t r = 0; r < ne; ++r) sunit_ = sunit_ && cnt_[r] == 1.0;
  }

  if (Gp_.size() < mc) Gp_.resize(mc);
  nchunk_ = std::min<int64_t>(std::max<int64_t>(mc_ / kChunkColumns, std::min<int64_t>(mc_, 1)),
                              kMaxChunks);
  s_.assign(static_cast<size_t>(8 * ngr_), 0.0);
  cv_.assign(ne, 0.0);
  bvc_.assign(static_cast<size_t>(8 * ngc_), 0.0);
  E_.assign(ne, 0.0);
  F_.assign(ne, 0.0);
  v_.assign(ne, 0.0);
  D_.assign(mc, 0.0);
  jt_.assign(mc, 0.0);
  c_.assign(mc, 0.0);
  vbuf_.assign(static_cast<size_t>(nchunk_) * ne, 0.0);
  scratch_.assign(static_cast<size_t>(nt_) * 6 * (ne + 8), 0.0);
}

void SurrogateWorkspace::column(int64_t q, const double* w, double gamma, bool fast, bool want_v,
                                double* vb, double* L, int tid) {
  const int64_t ne = ne_;
  const int64_t P = npass_[q];
  const int64_t F = ne - P;
  if (P == 0 || F == 0) {
    L[q] = kNaN;
    D_[q] = 0.0;
    c_[q] = 0.0;
    return;
  }
  const double pf = pw_[q] * fw_[q];
  const double wq = w[q];
  const int32_t* pi = idx_.data() + q * ne;
  const int32_t* fi = pi + P;
  const bool pout = P <= F;  // the larger set is the inner (vectorised) loop
  const int32_t* oidx = pout ? pi : fi;
  const int32_t* iidx = pout ? fi : pi;
  const int64_t no = pout ? P : F;
  const int64_t ni = pout ? F : P;

  const int64_t ld = ne + 8;  // room for padding to a multiple of 8
  double* buf = scratch_.data() + static_cast<size_t>(tid) * 6 * ld;
  double* oa = buf;
  double* oc = buf + ld;
  double* od = buf + 2 * ld;
  double* ix = buf + 3 * ld;
  double* ic = buf + 4 * ld;
  double* iacc = buf + 5 * ld;
  const double* cnt = cnt_.data();

  double sum_sig = 0.0, sum_dsig = 0.0;
  if (fast) {
    const double g = Gp_[q];
    const double* Eo = pout ? E_.data() : F_.data();
    const double* Ei = pout ? F_.data() : E_.data();
    for (int64_t o = 0; o < no; ++o) {
      const int32_t r = oidx[o];
      oa[o] = Eo[r] * g;
      oc[o] = cnt[r];
    }
    for (int64_t i = 0; i < ni; ++i) {
      const int32_t r = iidx[i];
      ix[i] = Ei[r];
      ic[i] = cnt[r];
      iacc[i] = 0.0;
    }
    const int64_t ni8 = (ni + 7) & ~int64_t(7);
    for (int64_t i = ni; i < ni8; ++i) {
      ix[i] = 0.0;
      ic[i] = 0.0;
      iacc[i] = 0.0;
    }
    pair_block_fast(oa, oc, od, no, ix, ic, iacc, ni8, &sum_sig, &sum_dsig);
  } else {
    // z = gamma (s_p - w_q) - gamma s_f
    const double* s = s_.data();
    for (int64_t o = 0; o < no; ++o) {
      const int32_t r = oidx[o];
      oa[o] = pout ? gamma * (s[r] - wq) : gamma * s[r];
      oc[o] = cnt[r];
    }
    for (int64_t i = 0; i < ni; ++i) {
      const int32_t r = iidx[i];
      ix[i] = pout ? gamma * s[r] : gamma * (s[r] - wq);
      ic[i] = cnt[r];
      iacc[i] = 0.0;
    }
    const double sgn = pout ? 1.0 : -1.0;
    for (int64_t o = 0; o < no; ++o) {
      double s1, s2;
      pairs_stable(oa[o], sgn, oc[o], ix, ic, iacc, ni, &s1, &s2);
      sum_sig += oc[o] * s1;
      sum_dsig += oc[o] * s2;
      od[o] = s2;
    }
  }
  L[q] = sum_sig / pf;
  D_[q] = sum_dsig;
  const double cq = wq / pf;
  c_[q] = cq;
  if (want_v) {
    // passers get +u, failers -u
    const double so = pout ? cq : -cq;
    for (int64_t o = 0; o < no; ++o) vb[oidx[o]] += so * od[o];
    for (int64_t i = 0; i < ni; ++i) vb[iidx[i]] -= so * iacc[i];
  }
}

double SurrogateWorkspace::evaluate(const double* w, double gamma, double* L, double* grad) {
  const int64_t ne = ne_, mc = mc_;
  if (mc == 0) return 0.0;
  if (ne == 0) {
    for (int64_t q = 0; q < mc; ++q) {
      L[q] = kNaN;
      if (grad) grad[q] = 0.0;
    }
    return 0.0;
  }
  // Scores s = B w over the kept rows and selected columns (ascending column order).
  masked_sums(rbytes_.data(), ngr_, mc, w, s_.data());
  const double wmax = std::max(0.0, lanes::max(w, mc));
  double smin = s_[0], smax = s_[0];
  for (int64_t r = 1; r < ne; ++r) {
    smin = std::min(smin, s_[r]);
    smax = std::max(smax, s_[r]);
  }
  const double span = gamma * (smax - smin + wmax);
  const bool fast = span <= kFastSpanLimit;  // false for NaN/inf
  if (fast) {
    const double s0 = 0.5 * (smin + smax);
    lanes::exp_affine_sum(s_.data(), ne, -gamma, s0, E_.data());
    lanes::exp_affine_sum(s_.data(), ne, gamma, s0, F_.data());
    lanes::exp_affine_sum(w, mc, gamma, 0.0, Gp_.data());  // exp(gamma w_j)
  }

  if (rows_ && fast)
    row_pair_eval(w, gamma, L, grad);
  else
    columns(w, gamma, fast, L, grad);

  // J = sum of w_j (L_j - 1/2) over the columns with pairs, in eight lanes
  double* jt = jt_.data();
  for (int64_t q = 0; q < mc; ++q) {
    const int64_t P = npass_[q];
    jt[q] = P > 0 && P < ne ? L[q] - 0.5 : 0.0;
  }
  return lanes::dot(w, jt, mc);
}

void SurrogateWorkspace::columns(const double* w, double gamma, bool fast, double* L,
                                 double* grad) {
  const int64_t ne = ne_, mc = mc_;
  const bool want_v = grad != nullptr;
  const int64_t nchunk = nchunk_;
  interrupt::Token* const tok = poll_ ? interrupt::current() : nullptr;
  // at most 32 kept rows: the register kernel where the CPU has one
  const SmallColumnsFn small = fast && !sbits_.empty() ? small_columns_kernel() : nullptr;
  SmallColumns sc{};
  if (small) {
    std::fill(sE_, sE_ + 32, 0.0);
    std::fill(sF_, sF_ + 32, 0.0);
    std::fill(sC_, sC_ + 32, 0.0);
    for (int64_t r = 0; r < ne; ++r) {
      sE_[r] = E_[r];
      sF_[r] = F_[r];
      sC_[r] = cnt_[r];
    }
    sc = SmallColumns{sE_,         sF_,       sC_,        sbits_.data(),        slists_.data(),
                      spf_.data(), w,         Gp_.data(), static_cast<int>(ne), sunit_,
                      L,           D_.data(), c_.data()};
  }
  // tid: this thread's slice of scratch_ (sized for this workspace's nt_ threads)
  const auto chunk = [&](int64_t c, int tid) {
    if (tok != nullptr && tok->poll()) return;  // cancelled: results are discarded
    double* vb = vbuf_.data() + static_cast<size_t>(c) * ne;
    const int64_t q0 = c * mc / nchunk, q1 = (c + 1) * mc / nchunk;
    if (small) {
      small(sc, q0, q1, want_v ? vb : nullptr);
      return;
    }
    if (want_v) std::fill(vb, vb + ne, 0.0);
    for (int64_t q = q0; q < q1; ++q) column(q, w, gamma, fast, want_v, vb, L, tid);
  };
  // One thread: no OpenMP call at all (even an if(false) region costs ~0.2 us
  // per evaluation, a few percent of a small ACES-O step).
  if (parallel_) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt_) schedule(dynamic, 1)
#endif
    for (int64_t c = 0; c < nchunk; ++c) chunk(c, thread_index());
  } else {
    // not thread_index(): inside a batch's parallel loop over tasks that is the
    // caller's index in the task team, not a slice of this workspace
    for (int64_t c = 0; c < nchunk; ++c) chunk(c, 0);
  }

  if (want_v) {
    for (int64_t r = 0; r < ne; ++r) v_[r] = 0.0;
    for (int64_t c = 0; c < nchunk; ++c) {
      const double* vb = vbuf_.data() + static_cast<size_t>(c) * ne;
      for (int64_t r = 0; r < ne; ++r) v_[r] += vb[r];
    }
    // (B^T c v)_q: sum of c_i v_i over the kept rows passing q, ascending
    for (int64_t r = 0; r < ne; ++r) cv_[r] = cnt_[r] * v_[r];
    masked_sums(cbytes_.data(), ngc_, ne, cv_.data(), bvc_.data());
    for (int64_t q = 0; q < mc; ++q) {
      const int64_t P = npass_[q];
      // A column every kept row passes has (B^T c v)_q = sum_i c_i v_i, which is
      // exactly 0 (each u^j sums to 0 over the rows); summing it would leave
      // rounding noise that Adam, normalizing step sizes, turns into real steps.
      const double bv = P < ne ? bvc_[q] : 0.0;
      double g = gamma * bv;
      if (P > 0 && P < ne) g += (L[q] - 0.5) - gamma * c_[q] * D_[q];
      grad[q] = g;
    }
  }
}

void SurrogateWorkspace::row_pair_eval(const double* w, double gamma, double* L, double* grad) {
  const int64_t ne = ne_, mc = mc_, mp = mp_;
  const double* cnt = cnt_.data();
  const double* E = E_.data();
  const double* Fx = F_.data();
  double* G = Gp_.data();
  double* cw = cw_.data();
  for (int64_t q = 0; q < mc; ++q) cw[q] = pf_[q] > 0.0 ? w[q] / pf_[q] : 0.0;
  const int64_t nrb = nrb_;
  interrupt::Token* const tok = poll_ ? interrupt::current() : nullptr;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt_) if (parallel_ && nrb > 1) schedule(dynamic, 1)
#endif
  for (int64_t b = 0; b < nrb; ++b) {
    const int64_t j0 = b * kRowPairBlock;
    const int64_t len = std::min(kRowPairBlock, mp - j0);
    double* vb = rvbuf_.data() + static_cast<size_t>(b) * ne;
    double* Ls = Ls_.data() + j0;
    double* Ds = Ds_.data() + j0;
    std::fill(vb, vb + ne, 0.0);
    std::fill(Ls, Ls + len, 0.0);
    std::fill(Ds, Ds + len, 0.0);
    for (int64_t p = 0; p + 1 < ne; ++p) {
      if (tok != nullptr && tok->poll()) break;  // cancelled: results are discarded
      const double* bp = xb_.data() + static_cast<size_t>(p) * mp + j0;
      const double cp = cnt[p];
      double vp = 0.0;
      int64_t r = p + 1;
      for (; r + 2 <= ne; r += 2) {
        const double* br = xb_.data() + static_cast<size_t>(r) * mp + j0;
        const double ab[6] = {E[p] * Fx[r],     E[r] * Fx[p],     cp * cnt[r],
                              E[p] * Fx[r + 1], E[r + 1] * Fx[p], cp * cnt[r + 1]};
        double R[2];
        pair_sweep2(bp, br, br + mp, ab, G + j0, cw + j0, Ls, Ds, len, R);
        vp += cnt[r] * R[0];
        vb[r] -= cp * R[0];
        vp += cnt[r + 1] * R[1];
        vb[r + 1] -= cp * R[1];
      }
      if (r < ne) {  // odd one out: paired with the zero row at cost 0
        const double* br = xb_.data() + static_cast<size_t>(r) * mp + j0;
        const double ab[6] = {E[p] * Fx[r], E[r] * Fx[p], cp * cnt[r], 1.0, 1.0, 0.0};
        double R[2];
        pair_sweep2(bp, br, xb_.data() + static_cast<size_t>(ne) * mp + j0, ab, G + j0, cw + j0, Ls,
                    Ds, len, R);
        vp += cnt[r] * R[0];
        vb[r] -= cp * R[0];
      }
      vb[p] += vp;
    }
  }
  const double* pf = pf_.data();
  for (int64_t q = 0; q < mc; ++q) {
    if (pf[q] > 0.0) {
      L[q] = Ls_[q] / pf[q];
      D_[q] = Ds_[q];
      c_[q] = cw[q];
    } else {
      L[q] = kNaN;
      D_[q] = 0.0;
      c_[q] = 0.0;
    }
  }
  if (!grad) return;
  // v summed over the blocks in block order (independent of the threads), then
  // B^T (c v) row by row along the contiguous columns.
  for (int64_t r = 0; r < ne; ++r) {
    double v = 0.0;
    for (int64_t b = 0; b < nrb; ++b) v += rvbuf_[static_cast<size_t>(b) * ne + r];
    v_[r] = v;
  }
  double* bv = bv_.data();
  std::fill(bv, bv + mp, 0.0);
  for (int64_t r = 0; r < ne; ++r)
    add_scaled_row(bv, xb_.data() + static_cast<size_t>(r) * mp, cnt[r] * v_[r], mp);
  for (int64_t q = 0; q < mc; ++q) {
    // a column constant over the kept rows gets exactly 0 (see columns())
    double g = 0.0;
    if (pf[q] > 0.0) {
      g = gamma * bv[q];
      g += (L[q] - 0.5) - gamma * c_[q] * D_[q];
    }
    grad[q] = g;
  }
}

double surrogate_loo_auc(const uint8_t* B, int64_t n, int64_t m, const double* w, double gamma,
                         const int64_t* counts, double* L, double* grad, bool parallel,
                         int n_threads) {
  if (m <= 0) return 0.0;
  SurrogateWorkspace ws(B, n, m, counts, nullptr, m, parallel, n_threads);
  return ws.evaluate(w, gamma, L, grad);
}

}  // namespace aces_fast
