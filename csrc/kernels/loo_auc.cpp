// Leave-one-out AUC of every test (docs/contract.rst §2), exact tie handling.
//
// Uniform weights: scores are integer row sums. Rows are bucketed by score
// (counting sort) and streamed row-major, level by level, keeping per column the
// number of failers at score <= v-2 and at v-1; a passer at level v has
// leave-one-out score v-1, so it beats the former and ties the latter. O(n m)
// with contiguous reads of B, integer counts only.
//
// Float weights: one stable sort of s; per column a two-pointer merge over the
// sorted order (passers shifted by -w_j keep their order, so the pointers only
// move forward), walking whichever class is smaller. Columns are processed in
// blocks of 64: a block is first packed into a row-permuted bit tile (one 64-bit
// word per row, bit jj = column j0 + jj) so each column is a contiguous stream at
// 8 bytes per row and thread, whatever m is. O(n log n + n m); no n x m matrix
// of leave-one-out scores is ever formed.
#include "kernels/ahead.hpp"
#include "kernels/bits.hpp"
#include "kernels/interrupt.hpp"
#include "kernels/kernels.hpp"
#include "simd/dispatch.hpp"
#include "simd/simd.hpp"
#include "simd/vec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace aces_fast {

bool has_openmp() {
#ifdef _OPENMP
  return true;
#else
  return false;
#endif
}

int max_threads() {
#ifdef _OPENMP
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

int thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int resolve_threads(bool parallel, int n_threads) {
#ifdef _OPENMP
  if (!parallel) return 1;
  if (n_threads < 0) return -n_threads;
  return n_threads > 0 ? n_threads : max_threads();
#else
  (void)parallel;
  (void)n_threads;
  return 1;
#endif
}

int threads_for_work(int64_t work, int n_threads) {
  if (work < kMinParallelCells) return 1;
  const int ceiling = resolve_threads(true, n_threads);
  if (n_threads > 0 || ceiling <= 1) return ceiling;
  const int64_t want = std::max<int64_t>(2, work / kCellsPerThread);
  return static_cast<int>(std::min<int64_t>(want, ceiling));
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Cells from which the column-block loops poll the interrupt token (a few
// milliseconds of work); smaller problems finish first.
constexpr int64_t kPollCells = int64_t(1) << 22;

// (wins + ties/2) / (P F) from twice = 2 wins + ties, with one rounding: both
// integers are exact in float64 below 2^53.
inline double auc_twice(int64_t twice, int64_t P, int64_t F) {
  if (P <= 0 || F <= 0) return kNaN;
  return static_cast<double>(twice) / (2.0 * static_cast<double>(P) * static_cast<double>(F));
}

inline double auc_value(int64_t wins, int64_t ties, int64_t P, int64_t F) {
  return auc_twice(2 * wins + ties, P, F);
}

// Widest column block of the uniform kernel (see block_width) and an all-fail
// row of that width.
constexpr int64_t kMaxUniformBlock = 512;
alignas(64) const uint8_t kZeroRow[kMaxUniformBlock] = {};

// Per-column-block pass of the uniform kernel. `row_of` lists the kept rows
// grouped by ascending integer score; level k spans [lstart[k], lstart[k+1]) and
// has score lval[k] and total multiplicity ltot[k].
//
// A passer at level v has leave-one-out score v - 1, so it beats the failers at
// score <= v - 2 and ties those at v - 1. Writing failers as all rows minus
// passers, with p_k the column's passers at level k (count-weighted),
// C(t) / N(t) all rows at score <= t / == t, and prev_k = p_{k-1} when level
// k-1 has score v_k - 1 (else 0):
//   2 wins + ties = sum_k p_k (a_k + p_k + prev_k) - P^2,
//   a_k = 2 C(v_k - 2) + N(v_k - 1),  P = sum_k p_k,
// (the passer-passer pairs at distance >= 2, and those at distance 1, are
// (P^2 - sum p_k^2 - 2 sum p_k prev_k) / 2 and sum p_k prev_k). So each level
// costs one multiply-add per column on top of counting its passers; a_k is a
// scalar per level.
//
// Passers of a level are counted in int32 (total multiplicity < 2^31). Acc is
// uint32 when the total multiplicity ntot < 2^16: the sum is then computed
// modulo 2^32 and the true value 2 wins + ties <= ntot^2 / 2 < 2^32 comes out
// exactly; double when every partial sum stays below 3 ntot^2 < 2^53 (exact and
// SIMD-friendly); uint64 (modulo 2^64) otherwise. `step` (uint32 only, may be
// null) is the hand-vectorized level step; it handles a prefix of the block's
// columns and the loops below the rest. Portable and AVX2 variants
// (uniform_block below).
template <typename Acc, bool kCounts>
ACES_FAST_KERNEL_BODY void uniform_block_body(const uint8_t* B, int64_t m, const int64_t* counts,
                                              const int64_t* row_of,
                                              const std::vector<int64_t>& lstart,
                                              const std::vector<int64_t>& lval,
                                              const std::vector<int64_t>& ltot, int64_t j0,
                                              int64_t bw, UniformLevelStep step, int32_t* pbuf,
                                              Acc* __restrict buf, double* out, int64_t* colsum) {
  Acc* __restrict acc = buf;        // sum_k p_k (a_k + p_k + prev_k)
  Acc* __restrict Ptot = buf + bw;  // P
  std::fill(buf, buf + 2 * bw, Acc(0));
  int32_t* Pcur = pbuf;        // passers at the current level
  int32_t* Pprev = pbuf + bw;  // passers at the previous level
  Acc total = 0;               // C(v_k - 1): all rows below the current level
  const int64_t nlev = static_cast<int64_t>(lval.size());
  ahead::Lines* const pf = ahead::pending();
  for (int64_t k = 0; k < nlev; ++k) {
    if (pf) pf->tick(1);  // about the rate of memory (kernels/ahead.hpp)
    const int64_t rbeg = lstart[k], rend = lstart[k + 1];
    const bool adjacent = k > 0 && lval[k - 1] == lval[k] - 1;
    const int64_t below = adjacent ? ltot[k - 1] : 0;  // N(v_k - 1)
    const Acc a = static_cast<Acc>(2 * (static_cast<int64_t>(total) - below) + below);
    total += static_cast<Acc>(ltot[k]);
    int64_t done = 0;
    if constexpr (std::is_same<Acc, uint32_t>::value) {
      if (step)
        done = step(B, m, kCounts ? counts : nullptr, row_of, rbeg, rend, j0, bw, a, adjacent,
                    Pprev, Pcur, acc, Ptot);
    }
    if (done < bw) {
      // Four rows per sweep over Pcur (a quarter of its loads and stores); the
      // first sweep overwrites and a level's last sweep is padded with all-fail
      // rows, because most levels hold only a few rows. ivdep: B's bytes may
      // alias anything by type; without it these loops stay scalar.
      int32_t* __restrict pc = Pcur + done;
      const int64_t len = bw - done;
      for (int64_t r = rbeg; r < rend; r += 4) {
        const uint8_t* rp[4];
        int32_t cc[4];
        for (int q = 0; q < 4; ++q) {
          if (r + q < rend) {
            const int64_t i = row_of[r + q];
            rp[q] = B + i * m + j0 + done;
            cc[q] = kCounts ? static_cast<int32_t>(counts[i]) : 1;
          } else {
            rp[q] = kZeroRow;
            cc[q] = 0;
          }
        }
        const uint8_t* __restrict b0 = rp[0];
        const uint8_t* __restrict b1 = rp[1];
        const uint8_t* __restrict b2 = rp[2];
        const uint8_t* __restrict b3 = rp[3];
        const int32_t keep = r == rbeg ? 0 : -1;
        const int32_t c0 = cc[0], c1 = cc[1], c2 = cc[2], c3 = cc[3];
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#elif defined(__GNUC__)
#pragma GCC ivdep
#endif
        for (int64_t jj = 0; jj < len; ++jj)
          pc[jj] = (pc[jj] & keep) + (((c0 & -static_cast<int32_t>(b0[jj] != 0)) +
                                       (c1 & -static_cast<int32_t>(b1[jj] != 0))) +
                                      ((c2 & -static_cast<int32_t>(b2[jj] != 0)) +
                                       (c3 & -static_cast<int32_t>(b3[jj] != 0))));
      }
      const int32_t* __restrict pp = Pprev;
      const Acc use_prev = adjacent ? Acc(1) : Acc(0);
      for (int64_t jj = done; jj < bw; ++jj) {
        const Acc p = static_cast<Acc>(Pcur[jj]);
        acc[jj] += p * (a + p + use_prev * static_cast<Acc>(pp[jj]));
        Ptot[jj] += p;
      }
    }
    std::swap(Pcur, Pprev);
  }
  for (int64_t jj = 0; jj < bw; ++jj) {
    const Acc P = Ptot[jj];
    const int64_t F = static_cast<int64_t>(total - P);
    const Acc twice = acc[jj] - P * P;  // 2 wins + ties
    out[j0 + jj] = auc_twice(static_cast<int64_t>(twice), static_cast<int64_t>(P), F);
  }
  if (colsum)
    for (int64_t jj = 0; jj < bw; ++jj) colsum[j0 + jj] = static_cast<int64_t>(Ptot[jj]);
}

template <typename Acc, bool kCounts>
constexpr simd::Dispatched<&uniform_block_body<Acc, kCounts>, simd::kAvx2> uniform_block{};

// tile[r] bit jj = (B[perm[r], j0 + jj] != 0) for jj < bw <= 64: one word per
// sorted row, so a column block costs 8 bytes per row whatever its width.
void build_bit_tile(const uint8_t* B, int64_t m, const int64_t* perm, int64_t ne, int64_t j0,
                    int64_t bw, uint64_t* tile) {
  for (int64_t r = 0; r < ne; ++r) tile[r] = bits::pass_bits(B + perm[r] * m + j0, bw);
}

// LOO-AUC of one column for float weights. tile/jj: bit jj of tile[r] is the
// column's 0/1 flag at sorted position r; sp:
// sorted scores; cp: multiplicities; ctot: prefix of cp. Scratch: ppos, fpos (ne),
// cf (ne + 1). With XL_r = (sp_r - wj) - T and XH_r = (sp_r - wj) + T (both
// nondecreasing in r), passer p beats failer f iff sp_f < XL_p and ties it iff
// XL_p <= sp_f <= XH_p. The merge walks the smaller class; each walk advances two
// forward-only pointers, the second starting from the first so that without
// near-ties its loop exits at once.
double weighted_column(const uint64_t* tile, int jj, const double* sp, const int64_t* cp,
                       const int64_t* ctot, int64_t ne, double wj, double T, int32_t* ppos,
                       int32_t* fpos, int32_t* cf) {
  // Branch-free compaction of both classes; cf[r] = failers' multiplicity before r.
  int64_t np = 0, nf = 0, acc = 0;
  for (int64_t r = 0; r < ne; ++r) {
    const int64_t bit = static_cast<int64_t>((tile[r] >> jj) & 1u);
    ppos[np] = static_cast<int32_t>(r);
    fpos[nf] = static_cast<int32_t>(r);
    np += bit;
    nf += 1 - bit;
    cf[r] = static_cast<int32_t>(acc);
    acc += (bit - 1) & cp[r];
  }
  cf[ne] = static_cast<int32_t>(acc);
  const int64_t F = acc;
  const int64_t P = ctot[ne] - F;
  if (np == 0 || nf == 0) return kNaN;
  int64_t wins = 0, ties = 0;
  if (np <= nf) {
    // For each passer: failers below XL (wins) and in [XL, XH] (ties).
    int64_t lo = 0, hi = 0;  // first position with sp >= XL / with sp > XH
    for (int64_t k = 0; k < np; ++k) {
      const int64_t r = ppos[k];
      const double x = sp[r] - wj;
      const double xl = x - T;
      const double xh = x + T;
      while (lo < ne && sp[lo] < xl) ++lo;
      hi = std::max(hi, lo);
      while (hi < ne && sp[hi] <= xh) ++hi;
      const int64_t fb = cf[lo];
      wins += cp[r] * fb;
      ties += cp[r] * (cf[hi] - fb);
    }
  } else {
    // For each failer f: passers with XH < sp_f lose, XL > sp_f win, others tie.
    int64_t lo = 0, hi = 0;  // first position with XH >= sp_f / with XL > sp_f
    for (int64_t k = 0; k < nf; ++k) {
      const int64_t r = fpos[k];
      const double y = sp[r];
      while (lo < ne && (sp[lo] - wj) + T < y) ++lo;
      hi = std::max(hi, lo);
      while (hi < ne && (sp[hi] - wj) - T <= y) ++hi;
      const int64_t p_lo = ctot[lo] - cf[lo];  // passers before lo
      const int64_t p_hi = ctot[hi] - cf[hi];  // passers before hi
      wins += cp[r] * (P - p_hi);
      ties += cp[r] * (p_hi - p_lo);
    }
  }
  return auc_value(wins, ties, P, F);
}

// Room for nlev levels (lstart has one bound more).
void resize_levels(UniformScratch& ws, size_t nlev) {
  ws.lstart.resize(nlev + 1);
  ws.lval.resize(nlev);
  ws.ltot.resize(nlev);
}

// The uniform kernel's levels (UniformScratch: row_of, lstart, lval, ltot) of
// the kept rows (count > 0) by their scores rs: from by_sum, every row's index
// in ascending order of rs (one pass), else by a counting sort. *ne, *ntot: the
// kept rows and their total multiplicity (no levels when *ne is 0).
void levels_by_sum(const int32_t* by_sum, int64_t n, const int64_t* counts, const int64_t* rs,
                   UniformScratch& ws, int64_t* ne_out, int64_t* ntot_out) {
  int64_t ne = 0, ntot = 0;
  const size_t nn = static_cast<size_t>(n);
  ws.row_of.resize(nn);
  resize_levels(ws, nn);
  int64_t* row_of = ws.row_of.data();
  int64_t* ls = ws.lstart.data();
  int64_t* lv = ws.lval.data();
  int64_t* lt = ws.ltot.data();
  ahead::Lines* const pf = ahead::pending();
  int64_t k = -1, prev = -1;
  for (int64_t t = 0; t < n; ++t) {
    if (pf) pf->tick(1);
    const int64_t i = by_sum[t];
    const int64_t c = counts ? counts[i] : 1;
    if (c <= 0) continue;
    if (rs[i] != prev) {
      prev = rs[i];
      ++k;
      ls[k] = ne;
      lv[k] = prev;
      lt[k] = 0;
    }
    lt[k] += c;
    ntot += c;
    row_of[ne++] = i;
  }
  const size_t nlev = static_cast<size_t>(k + 1);
  ls[nlev] = ne;
  resize_levels(ws, nlev);
  ws.row_of.resize(static_cast<size_t>(ne));
  *ne_out = ne;
  *ntot_out = ntot;
}

void levels_by_counting(int64_t n, int64_t m, const int64_t* counts, const int64_t* rs,
                        UniformScratch& ws, int64_t* ne_out, int64_t* ntot_out) {
  int64_t ne = 0, ntot = 0;
  // Counting sort of the kept rows by score. The scores' range first: only that
  // part of the histograms is cleared and read (clearing all m + 2 slots per
  // call was 3% of a 24x100 ACES-C task, whose row sums span a fraction of m).
  int64_t vmin = m, vmax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = counts ? counts[i] : 1;
    if (c <= 0) continue;
    ntot += c;
    ++ne;
    vmin = std::min(vmin, rs[i]);
    vmax = std::max(vmax, rs[i]);
  }
  *ne_out = ne;
  *ntot_out = ntot;
  if (ne == 0) return;
  if (ws.hist.size() < static_cast<size_t>(m) + 2) ws.hist.resize(static_cast<size_t>(m) + 2);
  if (ws.htot.size() < static_cast<size_t>(m) + 1) ws.htot.resize(static_cast<size_t>(m) + 1);
  int64_t* hist = ws.hist.data();
  int64_t* htot = ws.htot.data();
  std::fill(hist + vmin, hist + vmax + 2, int64_t(0));
  std::fill(htot + vmin, htot + vmax + 1, int64_t(0));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = counts ? counts[i] : 1;
    if (c <= 0) continue;
    hist[rs[i] + 1] += 1;
    htot[rs[i]] += c;
  }
  // Only the scores that occur matter (hist is 0 below vmin): levels first, then
  // hist serves as the scatter positions.
  for (int64_t v = vmin; v <= vmax; ++v) hist[v + 1] += hist[v];
  // Written through raw pointers, not push_back: the loop runs over every score
  // from vmin to vmax, and push_back's capacity checks and stores of the
  // vector's end cost as much as the rest of it (ACES-C on 24x100 tasks).
  {
    resize_levels(ws, static_cast<size_t>(std::min(ne, vmax - vmin + 1)));
    int64_t* ls = ws.lstart.data();
    int64_t* lv = ws.lval.data();
    int64_t* lt = ws.ltot.data();
    size_t k = 0;
    for (int64_t v = vmin; v <= vmax; ++v) {
      ls[k] = hist[v];
      lv[k] = v;
      lt[k] = htot[v];
      k += hist[v + 1] > hist[v] ? 1 : 0;
    }
    ls[k] = ne;
    resize_levels(ws, k);
  }
  ws.row_of.resize(static_cast<size_t>(ne));
  {
    int64_t* row_of = ws.row_of.data();
    ahead::Lines* const pf = ahead::pending();
    for (int64_t i = 0; i < n; ++i) {
      if (pf) pf->tick(1);
      if (counts && counts[i] <= 0) continue;
      row_of[hist[rs[i]]++] = i;
    }
  }
}

int64_t block_width(int64_t m, int nt, int64_t lo, int64_t hi) {
  // two blocks a thread balance a team; one thread gains nothing from them
  const int64_t parts = nt > 1 ? 2 * nt : 1;
  int64_t target = (m + parts - 1) / parts;
  target = ((target + 63) / 64) * 64;
  return std::max(lo, std::min(hi, target));
}

}  // namespace

void loo_auc_uniform(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts, double* out,
                     bool parallel, int n_threads) {
  UniformScratch ws;
  loo_auc_uniform_ex(B, n, m, counts, nullptr, out, nullptr, parallel, n_threads, ws);
}

bool loo_auc_reads_words(int64_t ntot) {
  return ntot < (int64_t(1) << 16) && uniform_block_words_kernel(static_cast<uint32_t>(ntot));
}

void loo_auc_uniform_ex(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts,
                        const int64_t* rowsums, double* out, int64_t* colsum, bool parallel,
                        int n_threads, UniformScratch& ws, const uint64_t* words,
                        const int32_t* by_sum) {
  if (m <= 0) return;
  if (n <= 0) {
    std::fill(out, out + m, kNaN);
    if (colsum) std::fill(colsum, colsum + m, int64_t(0));
    return;
  }
  const int nt = threads_for_work(parallel ? n * m : 0, n_threads);

  // Integer row sums (levels 0..m) of the kept rows.
  const int64_t* rs = rowsums;
  if (!rs) {
    ws.rs.resize(static_cast<size_t>(n));
    int64_t* rsw = ws.rs.data();
    const int64_t nw = (m + 63) / 64;
    const CountRows count_rows = count_rows_kernel();
    if (!B && nt <= 1) {
      count_rows(words, n, nw, nullptr, rsw);  // (dropped rows too: one loop, no branch)
    } else {
      for_each_index(nt, n, [&](int64_t i, int) {
        if (counts && counts[i] <= 0) return;
        if (B)
          rsw[i] = bits::count_passes(B + i * m, m);
        else
          count_rows(words + i * nw, 1, nw, nullptr, rsw + i);
      });
    }
    rs = rsw;
  }

  int64_t ne = 0, ntot = 0;
  if (by_sum)
    levels_by_sum(by_sum, n, counts, rs, ws, &ne, &ntot);
  else
    levels_by_counting(n, m, counts, rs, ws, &ne, &ntot);
  if (ne == 0) {
    std::fill(out, out + m, kNaN);
    if (colsum) std::fill(colsum, colsum + m, int64_t(0));
    return;
  }

  const int64_t W = block_width(m, nt, 64, kMaxUniformBlock);
  const int64_t nblocks = (m + W - 1) / W;
  // int32 lanes (twice the SIMD width of double) when every pair count fits:
  // wins + ties <= P F <= ntot^2 / 4 < 2^31 for ntot < 2^16.
  const bool exact_u32 = ntot < (int64_t(1) << 16);
  const bool exact_double = !exact_u32 && ntot < (int64_t(1) << 25);
  if (exact_u32)
    ws.ibuf.resize(static_cast<size_t>(nt) * 2 * W);
  else if (exact_double)
    ws.dbuf.resize(static_cast<size_t>(nt) * 2 * W);
  else
    ws.buf.resize(static_cast<size_t>(nt) * 2 * W);
  ws.pcur.resize(static_cast<size_t>(nt) * 2 * W);
  const int64_t* row_of = ws.row_of.data();
  const UniformLevelStep step = uniform_level_step();
  interrupt::Token* const tok = n * m >= kPollCells ? interrupt::current() : nullptr;
  // The register kernel takes each level's multiplier a_k and adjacency flag
  // (as uniform_block_body forms them).
  const UniformBlockWords block_words =
      exact_u32 && words ? uniform_block_words_kernel(static_cast<uint32_t>(ntot)) : nullptr;
  const UniformBlock block =
      exact_u32 && !block_words ? uniform_block_kernel(static_cast<uint32_t>(ntot)) : nullptr;
  const int64_t nlev = static_cast<int64_t>(ws.lval.size());
  if (block || block_words) {
    ws.la.resize(static_cast<size_t>(nlev));
    ws.ladj.resize(static_cast<size_t>(nlev));
    // through local pointers: a store to the uint8_t flags may alias anything,
    // so indexing the vectors reloaded their data pointers after every level
    const int64_t* lv = ws.lval.data();
    const int64_t* lt = ws.ltot.data();
    uint32_t* la = ws.la.data();
    uint8_t* ladj = ws.ladj.data();
    uint32_t total = 0;
    for (int64_t k = 0; k < nlev; ++k) {
      const bool adjacent = k > 0 && lv[k - 1] == lv[k] - 1;
      const int64_t below = adjacent ? lt[k - 1] : 0;
      la[k] = static_cast<uint32_t>(2 * (static_cast<int64_t>(total) - below) + below);
      ladj[k] = adjacent ? 1 : 0;
      total += static_cast<uint32_t>(lt[k]);
    }
  }

  for_each_index(
      nt, nblocks,
      [&](int64_t b, int tid) {
        if (tok != nullptr && tok->poll()) return;  // cancelled: results are discarded
        const int64_t j0 = b * W;
        const int64_t bw = std::min(W, m - j0);
        int32_t* pbuf = ws.pcur.data() + static_cast<size_t>(tid) * 2 * W;
        if (block_words) {
          block_words(words, (m + 63) / 64, counts, row_of, ws.lstart.data(), ws.la.data(),
                      ws.ladj.data(), nlev, static_cast<uint32_t>(ntot), j0, bw, out + j0,
                      colsum ? colsum + j0 : nullptr);
        } else if (block) {
          block(B, m, counts, row_of, ws.lstart.data(), ws.la.data(), ws.ladj.data(), nlev,
                static_cast<uint32_t>(ntot), j0, bw, out + j0, colsum ? colsum + j0 : nullptr);
        } else if (exact_u32) {
          uint32_t* ibuf = ws.ibuf.data() + static_cast<size_t>(tid) * 2 * W;
          if (counts)
            uniform_block<uint32_t, true>(B, m, counts, row_of, ws.lstart, ws.lval, ws.ltot, j0, bw,
                                          step, pbuf, ibuf, out, colsum);
          else
            uniform_block<uint32_t, false>(B, m, counts, row_of, ws.lstart, ws.lval, ws.ltot, j0,
                                           bw, step, pbuf, ibuf, out, colsum);
        } else if (exact_double) {
          double* dbuf = ws.dbuf.data() + static_cast<size_t>(tid) * 2 * W;
          if (counts)
            uniform_block<double, true>(B, m, counts, row_of, ws.lstart, ws.lval, ws.ltot, j0, bw,
                                        nullptr, pbuf, dbuf, out, colsum);
          else
            uniform_block<double, false>(B, m, counts, row_of, ws.lstart, ws.lval, ws.ltot, j0, bw,
                                         nullptr, pbuf, dbuf, out, colsum);
        } else {
          uint64_t* buf = ws.buf.data() + static_cast<size_t>(tid) * 2 * W;
          if (counts)
            uniform_block<uint64_t, true>(B, m, counts, row_of, ws.lstart, ws.lval, ws.ltot, j0, bw,
                                          nullptr, pbuf, buf, out, colsum);
          else
            uniform_block<uint64_t, false>(B, m, counts, row_of, ws.lstart, ws.lval, ws.ltot, j0,
                                           bw, nullptr, pbuf, buf, out, colsum);
        }
      },
      /*chunk=*/1);
}

void loo_auc(const uint8_t* B, int64_t n, int64_t m, const double* w, const int64_t* counts,
             double tie_tol, double* out, bool parallel, int n_threads) {
  if (w == nullptr) {
    loo_auc_uniform(B, n, m, counts, out, parallel, n_threads);
    return;
  }
  if (m <= 0) return;
  if (n <= 0) {
    std::fill(out, out + m, kNaN);
    return;
  }
  const int nt = threads_for_work(parallel ? n * m : 0, n_threads);

  std::vector<int64_t> perm;  // kept rows, ascending, then sorted by score
  perm.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    if (!counts || counts[i] > 0) perm.push_back(i);
  const int64_t ne = static_cast<int64_t>(perm.size());
  if (ne == 0) {
    std::fill(out, out + m, kNaN);
    return;
  }

  // Scores of the kept rows (indexed by kept position), each summed in ascending
  // column order.
  std::vector<double> s(static_cast<size_t>(ne));
  row_scores(B, m, w, nullptr, m, perm.data(), ne, s.data(), nt);
  double wsum = 0.0;
  for (int64_t j = 0; j < m; ++j) wsum += w[j];
  const double T = tie_tol * wsum;

  // One stable ascending sort of the kept rows.
  std::vector<int64_t> kpos(static_cast<size_t>(ne));
  std::iota(kpos.begin(), kpos.end(), int64_t(0));
  std::stable_sort(kpos.begin(), kpos.end(), [&s](int64_t a, int64_t b) { return s[a] < s[b]; });
  std::vector<double> ss(static_cast<size_t>(ne));
  std::vector<int64_t> cs(static_cast<size_t>(ne));
  for (int64_t r = 0; r < ne; ++r) {
    ss[r] = s[kpos[r]];
    kpos[r] = perm[kpos[r]];  // kept position -> row index
    cs[r] = counts ? counts[kpos[r]] : 1;
  }
  perm.swap(kpos);
  std::vector<double>().swap(s);
  std::vector<int64_t>().swap(kpos);

  // Per thread: a bit tile of the column block with rows in sorted order (each
  // column a contiguous stream), the passers' sorted positions and the failers'
  // prefix multiplicities of one column.
  // Blocks of up to 64 columns; narrower when that is what gives every thread a
  // block (a tile costs 8 bytes per row whatever its width).
  const int64_t W = nt > 1 ? std::max<int64_t>(8, std::min<int64_t>(64, (m + nt - 1) / nt)) : 64;
  const int64_t nblocks = (m + W - 1) / W;
  const size_t per_thread = static_cast<size_t>(ne);
  std::vector<uint64_t> tiles(static_cast<size_t>(nt) * per_thread);
  // int32: positions < ne and multiplicities < 2^31 (checked by every caller)
  std::vector<int32_t> pos_all(static_cast<size_t>(nt) * 2 * ne);
  std::vector<int32_t> cf_all(static_cast<size_t>(nt) * (ne + 1));
  // ctot[r] = total multiplicity before sorted position r
  std::vector<int64_t> ctot(static_cast<size_t>(ne) + 1, 0);
  for (int64_t r = 0; r < ne; ++r) ctot[r + 1] = ctot[r] + cs[r];
  interrupt::Token* const tok = n * m >= kPollCells ? interrupt::current() : nullptr;

  for_each_index(
      nt, nblocks,
      [&](int64_t b, int tid) {
        if (tok != nullptr && tok->poll()) return;  // cancelled: results are discarded
        const int64_t j0 = b * W;
        const int64_t bw = std::min(W, m - j0);
        uint64_t* tile = tiles.data() + static_cast<size_t>(tid) * per_thread;
        int32_t* ppos = pos_all.data() + static_cast<size_t>(tid) * 2 * ne;
        int32_t* fpos = ppos + ne;
        int32_t* cf = cf_all.data() + static_cast<size_t>(tid) * (ne + 1);
        build_bit_tile(B, m, perm.data(), ne, j0, bw, tile);
        for (int64_t jj = 0; jj < bw; ++jj) {
          out[j0 + jj] = weighted_column(tile, static_cast<int>(jj), ss.data(), cs.data(),
                                         ctot.data(), ne, w[j0 + jj], T, ppos, fpos, cf);
        }
      },
      /*chunk=*/1);
}

namespace {
typedef vec::v4d v4d_rs;
typedef vec::v4u v4u_rs;

// Rows k0 .. k0 + 7 of row_scores (those < nrows), one SIMD lane each: the
// rows' pass bits are packed first (words[q * 8 + l] = bits 64q.. of row l; nw
// words per row), then every column adds w_j or +0.0 to each lane. Each lane is
// still one sequential sum in ascending column order, so the result is the
// scalar loop's bit for bit, in every variant (portable and AVX2:
// row_scores_group below).
ACES_FAST_KERNEL_BODY void row_scores_group_body(const uint8_t* B, int64_t m, const double* w,
                                                 const int64_t* cols, int64_t ncols,
                                                 const int64_t* rows, int64_t nrows, int64_t k0,
                                                 int64_t nw, uint64_t* words, double* s) {
  for (int l = 0; l < 8; ++l) {
    const int64_t k = k0 + l;
    if (k < nrows) {
      const uint8_t* row = B + (rows ? rows[k] : k) * m;
      for (int64_t q = 0; q < nw; ++q)
        words[q * 8 + l] = bits::pass_bits(row + 64 * q, std::min<int64_t>(64, m - 64 * q));
    } else {
      for (int64_t q = 0; q < nw; ++q) words[q * 8 + l] = 0;
    }
  }
  v4d_rs acc0 = {0.0, 0.0, 0.0, 0.0}, acc1 = acc0;
  const v4u_rs one = {1, 1, 1, 1};
  for (int64_t q = 0; q < ncols; ++q) {
    const int64_t j = cols ? cols[q] : q;
    uint64_t wb;
    std::memcpy(&wb, &w[j], sizeof wb);
    const v4u_rs wv = {wb, wb, wb, wb};
    v4u_rs x0, x1;
    std::memcpy(&x0, words + (j >> 6) * 8, sizeof x0);
    std::memcpy(&x1, words + (j >> 6) * 8 + 4, sizeof x1);
    const uint64_t sh = static_cast<uint64_t>(j & 63);
    const v4u_rs m0 = -((x0 >> sh) & one);
    const v4u_rs m1 = -((x1 >> sh) & one);
    acc0 += ACES_FAST_VCAST(v4d_rs, wv & m0);
    acc1 += ACES_FAST_VCAST(v4d_rs, wv & m1);
  }
  for (int l = 0; l < 4; ++l) {
    if (k0 + l < nrows) s[k0 + l] = acc0[l];
    if (k0 + 4 + l < nrows) s[k0 + 4 + l] = acc1[l];
  }
}
}  // namespace

void row_scores(const uint8_t* B, int64_t m, const double* w, const int64_t* cols, int64_t ncols,
                const int64_t* rows, int64_t nrows, double* s, int n_threads) {
  // Groups of eight rows; the variant is fetched outside the parallel region
  // (an OpenMP region is outlined without the variant's instruction set).
  const auto group = simd::kernel<&row_scores_group_body, simd::kAvx2>();
  const int nt = n_threads > 1 ? n_threads : 1;
  const int64_t nw = (m + 63) / 64;
  const int64_t ng = (nrows + 7) / 8;
  std::vector<uint64_t> wbuf(static_cast<size_t>(nt) * 8 *
                             static_cast<size_t>(std::max<int64_t>(nw, 1)));
  for_each_index(nt, ng, [&](int64_t g, int tid) {
    uint64_t* words = wbuf.data() + static_cast<size_t>(tid) * 8 * nw;
    group(B, m, w, cols, ncols, rows, nrows, 8 * g, nw, words, s);
  });
}

}  // namespace aces_fast
