// Leave-one-out AUC of every test (SPEC section 2), exact tie handling.
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
// blocks of 64: a block is first copied into a transposed, row-permuted 0/1 tile
// so each column is a contiguous stream. O(n log n + n m); no n x m matrix of
// leave-one-out scores is ever formed.
#include "kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

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

int resolve_threads(bool parallel, int n_threads) {
#ifdef _OPENMP
  if (!parallel) return 1;
  return n_threads > 0 ? n_threads : max_threads();
#else
  (void)parallel;
  (void)n_threads;
  return 1;
#endif
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline double auc_value(int64_t wins, int64_t ties, int64_t P, int64_t F) {
  if (P <= 0 || F <= 0) return kNaN;
  // (wins + ties/2) / (P F) with one rounding: both integers are exact in
  // float64 below 2^53.
  return static_cast<double>(2 * wins + ties) / (2.0 * static_cast<double>(P) * static_cast<double>(F));
}

// Per-column-block pass of the uniform kernel. `row_of` lists the kept rows
// grouped by ascending integer score; level k spans [lstart[k], lstart[k+1]) and
// has score lval[k] and total multiplicity ltot[k].
template <bool kCounts>
void uniform_block(const uint8_t* B, int64_t m, const int64_t* counts, const int64_t* row_of,
                   const std::vector<int64_t>& lstart, const std::vector<int64_t>& lval,
                   const std::vector<int64_t>& ltot, int64_t j0, int64_t bw, int64_t* buf,
                   double* out) {
  int64_t* cumF = buf;           // failers with score <= v - 2
  int64_t* Fat = buf + bw;       // failers with score == v - 1
  int64_t* Pcur = buf + 2 * bw;  // passers at the current level
  int64_t* wins = buf + 3 * bw;
  int64_t* ties = buf + 4 * bw;
  int64_t* Ptot = buf + 5 * bw;
  int64_t* Ftot = buf + 6 * bw;
  std::fill(buf, buf + 7 * bw, int64_t(0));
  const int64_t nlev = static_cast<int64_t>(lval.size());
  for (int64_t k = 0; k < nlev; ++k) {
    std::fill(Pcur, Pcur + bw, int64_t(0));
    for (int64_t r = lstart[k]; r < lstart[k + 1]; ++r) {
      const int64_t i = row_of[r];
      const uint8_t* row = B + i * m + j0;
      if (kCounts) {
        const int64_t c = counts[i];
        for (int64_t jj = 0; jj < bw; ++jj) Pcur[jj] += row[jj] ? c : int64_t(0);
      } else {
        for (int64_t jj = 0; jj < bw; ++jj) Pcur[jj] += static_cast<int64_t>(row[jj] != 0);
      }
    }
    const int64_t tot = ltot[k];
    const bool next_adjacent = (k + 1 < nlev) && (lval[k + 1] == lval[k] + 1);
    for (int64_t jj = 0; jj < bw; ++jj) {
      const int64_t p = Pcur[jj];
      const int64_t f = tot - p;
      wins[jj] += p * cumF[jj];
      ties[jj] += p * Fat[jj];
      Ptot[jj] += p;
      Ftot[jj] += f;
      if (next_adjacent) {
        cumF[jj] += Fat[jj];
        Fat[jj] = f;
      } else {
        cumF[jj] += Fat[jj] + f;
        Fat[jj] = 0;
      }
    }
  }
  for (int64_t jj = 0; jj < bw; ++jj) out[j0 + jj] = auc_value(wins[jj], ties[jj], Ptot[jj], Ftot[jj]);
}

// b != 0 ? x : +0.0 without a branch (a + 0.0 == a, so sums equal the branchy form).
inline double masked(double x, uint8_t b) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  u &= ~(static_cast<uint64_t>(b != 0) - 1);
  double r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// tile[jj * ne + r] = (B[perm[r], j0 + jj] != 0) for jj < bw, r < ne: a transposed,
// row-permuted 0/1 copy of a column block, built through 64 x 64 sub-blocks so
// that reads and writes both touch whole cache lines.
void build_tile(const uint8_t* B, int64_t m, const int64_t* perm, int64_t ne, int64_t j0,
                int64_t bw, uint8_t* tile) {
  alignas(64) uint8_t loc[64][64];
  for (int64_t r0 = 0; r0 < ne; r0 += 64) {
    const int64_t rb = std::min<int64_t>(64, ne - r0);
    for (int64_t k = 0; k < rb; ++k)
      std::memcpy(loc[k], B + perm[r0 + k] * m + j0, static_cast<size_t>(bw));
    for (int64_t jj = 0; jj < bw; ++jj) {
      uint8_t* dst = tile + jj * ne + r0;
      for (int64_t k = 0; k < rb; ++k) dst[k] = static_cast<uint8_t>(loc[k][jj] != 0);
    }
  }
}

// LOO-AUC of one column for float weights. col: 0/1 flags in sorted order; sp:
// sorted scores; cp: multiplicities; ctot: prefix of cp. Scratch: ppos, fpos (ne),
// cf (ne + 1). With XL_r = (sp_r - wj) - T and XH_r = (sp_r - wj) + T (both
// nondecreasing in r), passer p beats failer f iff sp_f < XL_p and ties it iff
// XL_p <= sp_f <= XH_p. The merge walks the smaller class; each walk advances two
// forward-only pointers, the second starting from the first so that without
// near-ties its loop exits at once.
double weighted_column(const uint8_t* col, const double* sp, const int64_t* cp,
                       const int64_t* ctot, int64_t ne, double wj, double T, int64_t* ppos,
                       int64_t* fpos, int64_t* cf) {
  // Branch-free compaction of both classes; cf[r] = failers' multiplicity before r.
  int64_t np = 0, nf = 0, acc = 0;
  for (int64_t r = 0; r < ne; ++r) {
    const int64_t bit = col[r];
    ppos[np] = r;
    fpos[nf] = r;
    np += bit;
    nf += 1 - bit;
    cf[r] = acc;
    acc += (bit - 1) & cp[r];
  }
  cf[ne] = acc;
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

int64_t block_width(int64_t m, int nt, int64_t lo, int64_t hi) {
  int64_t target = (m + 2 * nt - 1) / (2 * nt);
  target = ((target + 63) / 64) * 64;
  return std::max(lo, std::min(hi, target));
}

}  // namespace

void loo_auc_uniform(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts, double* out,
                     bool parallel, int n_threads) {
  if (m <= 0) return;
  if (n <= 0) {
    std::fill(out, out + m, kNaN);
    return;
  }
  const int nt = resolve_threads(parallel, n_threads);

  // Integer row sums (levels 0..m).
  std::vector<int64_t> rs(static_cast<size_t>(n));
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
#endif
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = B + i * m;
    int64_t c = 0;
    for (int64_t j = 0; j < m; ++j) c += static_cast<int64_t>(row[j] != 0);
    rs[i] = c;
  }

  // Counting sort of the kept rows by score.
  std::vector<int64_t> hist(static_cast<size_t>(m) + 2, 0);
  std::vector<int64_t> htot(static_cast<size_t>(m) + 1, 0);
  int64_t ne = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = counts ? counts[i] : 1;
    if (c <= 0) continue;
    hist[rs[i] + 1] += 1;
    htot[rs[i]] += c;
    ++ne;
  }
  if (ne == 0) {
    std::fill(out, out + m, kNaN);
    return;
  }
  for (int64_t v = 0; v <= m; ++v) hist[v + 1] += hist[v];
  std::vector<int64_t> row_of(static_cast<size_t>(ne));
  {
    std::vector<int64_t> pos(hist.begin(), hist.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      if (counts && counts[i] <= 0) continue;
      row_of[pos[rs[i]]++] = i;
    }
  }
  std::vector<int64_t> lstart, lval, ltot;
  for (int64_t v = 0; v <= m; ++v) {
    if (hist[v + 1] > hist[v]) {
      lstart.push_back(hist[v]);
      lval.push_back(v);
      ltot.push_back(htot[v]);
    }
  }
  lstart.push_back(ne);

  const int64_t W = block_width(m, nt, 64, 512);
  const int64_t nblocks = (m + W - 1) / W;
  std::vector<int64_t> scratch(static_cast<size_t>(nt) * 7 * W);

#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
#endif
  for (int64_t b = 0; b < nblocks; ++b) {
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
#else
    const int tid = 0;
#endif
    const int64_t j0 = b * W;
    const int64_t bw = std::min(W, m - j0);
    int64_t* buf = scratch.data() + static_cast<size_t>(tid) * 7 * W;
    if (counts)
      uniform_block<true>(B, m, counts, row_of.data(), lstart, lval, ltot, j0, bw, buf, out);
    else
      uniform_block<false>(B, m, counts, row_of.data(), lstart, lval, ltot, j0, bw, buf, out);
  }
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
  const int nt = resolve_threads(parallel, n_threads);

  // Scores, each summed sequentially in ascending column order; four rows at a
  // time so the four dependency chains overlap.
  std::vector<double> s(static_cast<size_t>(n));
  const int64_t n4 = (n + 3) / 4;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
#endif
  for (int64_t g = 0; g < n4; ++g) {
    const int64_t i0 = 4 * g;
    if (i0 + 4 <= n) {
      const uint8_t* r0 = B + i0 * m;
      const uint8_t* r1 = r0 + m;
      const uint8_t* r2 = r1 + m;
      const uint8_t* r3 = r2 + m;
      double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
      for (int64_t j = 0; j < m; ++j) {
        const double wj = w[j];
        a0 += masked(wj, r0[j]);
        a1 += masked(wj, r1[j]);
        a2 += masked(wj, r2[j]);
        a3 += masked(wj, r3[j]);
      }
      s[i0] = a0;
      s[i0 + 1] = a1;
      s[i0 + 2] = a2;
      s[i0 + 3] = a3;
    } else {
      for (int64_t i = i0; i < n; ++i) {
        const uint8_t* row = B + i * m;
        double acc = 0.0;
        for (int64_t j = 0; j < m; ++j) acc += masked(w[j], row[j]);
        s[i] = acc;
      }
    }
  }
  double wsum = 0.0;
  for (int64_t j = 0; j < m; ++j) wsum += w[j];
  const double T = tie_tol * wsum;

  // One stable ascending sort of the kept rows.
  std::vector<int64_t> perm;
  perm.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    if (!counts || counts[i] > 0) perm.push_back(i);
  const int64_t ne = static_cast<int64_t>(perm.size());
  if (ne == 0) {
    std::fill(out, out + m, kNaN);
    return;
  }
  std::stable_sort(perm.begin(), perm.end(), [&s](int64_t a, int64_t b) { return s[a] < s[b]; });
  std::vector<double> ss(static_cast<size_t>(ne));
  std::vector<int64_t> cs(static_cast<size_t>(ne));
  for (int64_t r = 0; r < ne; ++r) {
    ss[r] = s[perm[r]];
    cs[r] = counts ? counts[perm[r]] : 1;
  }

  // Per thread: a W x ne transposed 0/1 tile of the column block with rows in
  // sorted order (each column a contiguous stream), the passers' sorted
  // positions and the failers' prefix multiplicities of one column.
  constexpr int64_t W = 64;
  const int64_t nblocks = (m + W - 1) / W;
  const size_t per_thread = static_cast<size_t>(W * ne);
  std::vector<uint8_t> tiles(static_cast<size_t>(nt) * per_thread);
  std::vector<int64_t> pos_all(static_cast<size_t>(nt) * 2 * ne);
  std::vector<int64_t> cf_all(static_cast<size_t>(nt) * (ne + 1));
  // ctot[r] = total multiplicity before sorted position r
  std::vector<int64_t> ctot(static_cast<size_t>(ne) + 1, 0);
  for (int64_t r = 0; r < ne; ++r) ctot[r + 1] = ctot[r] + cs[r];

#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(dynamic, 1)
#endif
  for (int64_t b = 0; b < nblocks; ++b) {
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
#else
    const int tid = 0;
#endif
    const int64_t j0 = b * W;
    const int64_t bw = std::min(W, m - j0);
    uint8_t* tile = tiles.data() + static_cast<size_t>(tid) * per_thread;
    int64_t* ppos = pos_all.data() + static_cast<size_t>(tid) * 2 * ne;
    int64_t* fpos = ppos + ne;
    int64_t* cf = cf_all.data() + static_cast<size_t>(tid) * (ne + 1);
    build_tile(B, m, perm.data(), ne, j0, bw, tile);
    for (int64_t jj = 0; jj < bw; ++jj) {
      out[j0 + jj] = weighted_column(tile + jj * ne, ss.data(), cs.data(), ctot.data(), ne,
                                     w[j0 + jj], T, ppos, fpos, cf);
    }
  }
}

}  // namespace aces_fast
