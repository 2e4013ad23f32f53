// Whole ranking methods of one task (see methods.hpp).
#include "methods/methods.hpp"

#include "kernels/ahead.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/bits.hpp"
#include "kernels/interrupt.hpp"
#include "portable.hpp"
#include "simd/dispatch.hpp"
#include "simd/simd.hpp"

namespace aces_fast {

namespace {

// ACES-O's warm start: logits log(w_C + kWarmEps) from the ACES-C weights (the
// contract's value, defined in src/aces_fast/_constants.py; tests/test_constants.py
// checks that they agree).
constexpr double kWarmEps = 1e-3;

// Count-weighted column sums: colsum[j] = sum_i c_i [B_ij != 0]. int32 lanes
// (the total multiplicity is < 2^31) so the byte-to-count loop vectorizes.
// Without multiplicities the rows are first counted in byte lanes, four rows a
// step, 252 rows a block (at most 252 per lane, no overflow), then added to the
// int32 lanes: a byte lane is four times as many counts per vector instruction,
// and the widening runs once a block instead of once a row (200 x 500: 9.3 of
// a majority-vote task's 42 us went to the int32 loop). Integer counts, so
// every variant and block size gives the same sums. Portable and AVX2 variants
// (column_sums below).
ACES_FAST_KERNEL_BODY void column_sums_body(const uint8_t* B, int64_t n, int64_t m,
                                            const int64_t* counts, int64_t* colsum,
                                            std::vector<int32_t>& acc32,
                                            std::vector<uint8_t>& acc8) {
  acc32.assign(static_cast<size_t>(m), 0);
  int32_t* __restrict acc = acc32.data();
  if (counts == nullptr) {
    constexpr int64_t kBlock = 252;  // a multiple of 4, at most 255
    acc8.resize(static_cast<size_t>(m));
    uint8_t* __restrict a8 = acc8.data();
    // a batch's next task, as many lines as this loop reads (kernels/ahead.hpp): majority
    // vote has no other loop long enough to bring it in while this one computes
    ahead::Lines* const pf = ahead::pending();
    const int lines = static_cast<int>(std::min<int64_t>(4 * ((m + 63) / 64), 64));
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      const int64_t i1 = std::min(n, i0 + kBlock);
      std::fill(a8, a8 + m, uint8_t(0));
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        if (pf) pf->tick(lines);
        const uint8_t* __restrict r0 = B + i * m;
        const uint8_t* __restrict r1 = r0 + m;
        const uint8_t* __restrict r2 = r1 + m;
        const uint8_t* __restrict r3 = r2 + m;
        for (int64_t j = 0; j < m; ++j)
          a8[j] = static_cast<uint8_t>(a8[j] + (r0[j] != 0) + (r1[j] != 0) + (r2[j] != 0) +
                                       (r3[j] != 0));
      }
      for (; i < i1; ++i) {
        const uint8_t* __restrict row = B + i * m;
        for (int64_t j = 0; j < m; ++j) a8[j] = static_cast<uint8_t>(a8[j] + (row[j] != 0));
      }
      for (int64_t j = 0; j < m; ++j) acc[j] += a8[j];
    }
    for (int64_t j = 0; j < m; ++j) colsum[j] = acc[j];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = counts ? counts[i] : 1;
    if (c <= 0) continue;
    const uint8_t* __restrict row = B + i * m;
    if (c == 1) {
      for (int64_t j = 0; j < m; ++j) acc[j] += static_cast<int32_t>(row[j] != 0);
    } else {
      const int32_t c32 = static_cast<int32_t>(c);
      for (int64_t j = 0; j < m; ++j) acc[j] += c32 & -static_cast<int32_t>(row[j] != 0);
    }
  }
  for (int64_t j = 0; j < m; ++j) colsum[j] = acc[j];
}
constexpr simd::Dispatched<&column_sums_body, simd::kAvx2> column_sums{};

// Row sums of every row (used only when dedup did not already compute them).
void row_sums(const uint8_t* B, int64_t n, int64_t m, int64_t* rs) {
  for (int64_t i = 0; i < n; ++i) rs[i] = bits::count_passes(B + i * m, m);
}

inline bool nonconstant(int64_t colsum, int64_t n) { return colsum > 0 && colsum < n; }

// Majority-vote weights into w (1 for a test some rows pass and some fail, else
// 0); returns their sum (an integer count, exact in any order).
double majority_weights(const int64_t* colsum, int64_t n, int64_t m, double* w) {
  int64_t count = 0;
  for (int64_t j = 0; j < m; ++j) {
    const bool on = nonconstant(colsum[j], n);
    w[j] = on ? 1.0 : 0.0;
    count += on;
  }
  return static_cast<double>(count);
}

// Of n rows packed into words (nw a row, unused bits 0): all (nw words) = their
// AND, the tests every row passes, and any (nw words, when not null) = their
// OR, the tests some row passes.
void and_or_rows(const uint64_t* words, int64_t n, int64_t nw, uint64_t* all, uint64_t* any) {
  std::fill(all, all + nw, ~uint64_t(0));
  if (!any) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t q = 0; q < nw; ++q) all[q] &= words[i * nw + q];
    return;
  }
  std::fill(any, any + nw, uint64_t(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t q = 0; q < nw; ++q) {
      all[q] &= words[i * nw + q];
      any[q] |= words[i * nw + q];
    }
}

// majority_weights from the rows packed into words (n rows of nw = ceil(m / 64)
// words, unused bits 0) instead of the column sums: a test is constant when
// every row passes it or none does, so the tests some rows pass (the OR of the
// rows) and not all of them (the AND) are the weighted ones. The same weights,
// from n * nw word operations instead of a pass over the n * m bytes (column
// sums were a fifth of a 200 x 500 majority vote). any, all: scratch.
double majority_weights_words(const uint64_t* words, int64_t n, int64_t m, double* w,
                              std::vector<uint64_t>& any, std::vector<uint64_t>& all) {
  const int64_t nw = (m + 63) / 64;
  any.resize(static_cast<size_t>(nw));
  all.resize(static_cast<size_t>(nw));
  const uint64_t* a = any.data();
  const uint64_t* e = all.data();
  and_or_rows(words, n, nw, all.data(), any.data());
  int64_t count = 0;
  for (int64_t j = 0; j < m; ++j) {
    const bool on = ((a[j / 64] & ~e[j / 64]) >> (j % 64)) & 1;
    w[j] = on ? 1.0 : 0.0;
    count += on;
  }
  return static_cast<double>(count);
}

// Unnormalized ACES-C weights into w from the uniform LOO-AUC L and the column
// sums (base.Backend.aces_c_weights). Branch-free so it vectorizes: about half
// the columns of a typical matrix are informative, in no pattern a branch
// predictor learns. colsum (0 <= c <= n < 2^31) converts to double exactly by
// the 2^52 trick (AVX2 has no int64 -> double conversion, so a cast would stay
// scalar); the arithmetic is the NumPy glue's, operation for operation.
ACES_FAST_KERNEL_BODY void aces_c_raw_body(const double* __restrict L,
                                           const int64_t* __restrict colsum, int64_t n, int64_t m,
                                           bool weighted, double* __restrict w) {
  constexpr double k2p52 = 4503599627370496.0;
  constexpr uint64_t k2p52bits = 0x4330000000000000ULL;
  const double dn = static_cast<double>(n);
  if (!weighted) {
    for (int64_t j = 0; j < m; ++j) w[j] = L[j] > 0.5 ? 1.0 : 0.0;  // NaN compares false
    return;
  }
  // (a select after a division stays a branch under trapping math: the kept
  // lanes are chosen by a bit mask instead, giving +0.0 where not informative)
  ACES_FAST_OMP_SIMD
  for (int64_t j = 0; j < m; ++j) {
    const uint64_t bits = static_cast<uint64_t>(colsum[j]) | k2p52bits;
    double c;
    std::memcpy(&c, &bits, sizeof c);
    const double p = (c - k2p52) / dn;
    const double x = (L[j] - 0.5) * p * (1.0 - p);  // the NumPy glue's association
    uint64_t xb;
    std::memcpy(&xb, &x, sizeof xb);
    xb &= L[j] > 0.5 ? ~uint64_t(0) : uint64_t(0);
    std::memcpy(&w[j], &xb, sizeof xb);
  }
}
constexpr simd::Dispatched<&aces_c_raw_body, simd::kAvx512> aces_c_raw{};

// ACES-C weights (unnormalized) into w and their sum32 into *total; returns
// true when it fell back to majority (no informative test).
bool aces_c_weights(const double* L, const int64_t* colsum, int64_t n, int64_t m, bool weighted,
                    double* w, double* total) {
  aces_c_raw(L, colsum, n, m, weighted, w);
  // Every weight is >= 0 (an informative column is non-constant, so 0 < p < 1),
  // so some weight is positive iff the sum is.
  *total = sum32(w, m);
  if (*total > 0.0) return false;
  *total = majority_weights(colsum, n, m, w);
  return true;
}

// out = w / total (element-wise, a dispatched body: vector divisions).
ACES_FAST_KERNEL_BODY void divide_by_body(const double* __restrict w, int64_t m, double total,
                                          double* __restrict out) {
  for (int64_t j = 0; j < m; ++j) out[j] = w[j] / total;
}
constexpr simd::Dispatched<&divide_by_body, simd::kAvx512> divide_by{};

// out = w / total, or zeros when total (the caller's sum of w) is not positive.
void normalize_by(const double* w, int64_t m, double total, double* out) {
  if (total > 0.0)
    divide_by(w, m, total, out);
  else
    std::fill(out, out + m, 0.0);
}

// out = w / sum32(w), or zeros when the sum is not positive.
void normalize(const double* w, int64_t m, double* out) { normalize_by(w, m, sum32(w, m), out); }

// Indices of the k rows with the largest row sums (stable: among equal sums the
// lower index wins), written ascending into rows (k); base.top_k_rows. O(n + m).
void select_top_rows(const int64_t* rs, int64_t n, int64_t m, int64_t k, int64_t* rows,
                     std::vector<int64_t>& hist) {
  if (k >= n) {
    for (int64_t i = 0; i < n; ++i) rows[i] = i;
    return;
  }
  hist.assign(static_cast<size_t>(m) + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++hist[rs[i]];
  // v*: the smallest row sum that still gets (part of) its rows selected
  int64_t above = 0, v = m;
  for (; v >= 0; --v) {
    if (above + hist[v] >= k) break;
    above += hist[v];
  }
  int64_t take_at_v = k - above;  // rows with sum v*, lowest indices first
  int64_t r = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (rs[i] > v) {
      rows[r++] = i;
    } else if (rs[i] == v && take_at_v > 0) {
      rows[r++] = i;
      --take_at_v;
    }
  }
}

template <typename T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// True when at least one weight is nonzero and every nonzero weight is equal.
// The first nonzero weight found, the rest are checked sixteen at a time
// without a branch per weight: zero and nonzero weights alternate in no pattern
// a predictor learns (a branch per weight was a seventh of a 24 x 100 ACES-C
// filter call), and unequal weights (ACES-C, ACES-O) stop the check at the
// first group, not after all m.
bool equal_weights(const double* w, int64_t m) {
  int64_t j = 0;
  while (j < m && w[j] == 0.0) ++j;
  if (j == m) return false;
  const double w0 = w[j];
  for (; j < m; j += 16) {
    const int64_t end = std::min<int64_t>(m, j + 16);
    bool same = true;
    for (int64_t k = j; k < end; ++k) same &= (w[k] == 0.0) | (w[k] == w0);
    if (!same) return false;
  }
  return true;
}

// s (n) = B w; with a dedup plan only the first row of each class is summed and
// the others copy it (identical bytes give identical sums). packed (nullable):
// every row's packed pattern (RowPlan::words), else the rows are packed here.
void scores(const uint8_t* B, int64_t n, int64_t m, const double* w, const int64_t* rep,
            const uint64_t* packed, double* s, MethodWorkspace& ws, int nt) {
  const int64_t nw = (m + 63) / 64;
  const PackRow pack = pack_row_kernel();
  if (equal_weights(w, m)) {
    // Every nonzero weight equals w0 (majority, ACES-C filter or fallback): the
    // sequential sum over t passes is the same float whatever the columns, so
    // s_i = S[t_i] with S[t] = S[t-1] + w0; t_i by popcount. Identical result,
    // no per-cell float work. The mask of weighted columns is built a word at a
    // time in a register (setting its bits in memory column by column chained
    // every store to the one before: 1 us of a 200 x 500 majority vote).
    ws.mask.resize(static_cast<size_t>(nw));
    uint64_t* mask_w = ws.mask.data();
    int64_t nc = 0;
    double w0 = 0.0;
    for (int64_t q = 0; q < nw; ++q) {
      const int64_t j0 = q * 64, len = std::min<int64_t>(64, m - j0);
      const uint64_t word = bits::nonzero_bits(w + j0, len);
      if (word != 0 && nc == 0) w0 = w[j0 + portable::ctz64(word)];
      mask_w[q] = word;
      nc += bits::popcount64(word);
    }
    ws.stmp.resize(static_cast<size_t>(nc) + 1);
    double* S = ws.stmp.data();
    S[0] = 0.0;
    for (int64_t t = 1; t <= nc; ++t) S[t] = S[t - 1] + w0;
    const uint64_t* mask = ws.mask.data();
    ahead::Lines* const pf = ahead::pending();  // as in column_sums_body
    const int lines = static_cast<int>(std::min<int64_t>(nw, 16));
    // every row's weighted passes by POPCNT (count_rows)
    const CountRows count = count_rows_kernel();
    if (packed) {
      // a group of rows a call; a repeated row counts what its class's first
      // row counts
      ws.passes.resize(static_cast<size_t>(n));
      int64_t* t = ws.passes.data();
      constexpr int64_t kRows = 16;
      for (int64_t i0 = 0; i0 < n; i0 += kRows) {
        const int64_t nr = std::min(kRows, n - i0);
        if (pf) pf->tick(static_cast<int>(nr) * lines);
        count(packed + i0 * nw, nr, nw, mask, t + i0);
      }
      for (int64_t i = 0; i < n; ++i) s[i] = S[t[i]];
      return;
    }
    ws.words.resize(static_cast<size_t>(nw));
    for (int64_t i = 0; i < n; ++i) {
      if (pf) pf->tick(lines);
      if (rep && rep[i] != i) {
        s[i] = s[rep[i]];
        continue;
      }
      uint64_t* words = ws.words.data();
      pack(B + i * m, m, words, nullptr);
      int64_t t = 0;
      count(words, 1, nw, mask, &t);
      s[i] = S[t];
    }
    return;
  }
  // General weights: simd.hpp's nibble-table association, over the class
  // representatives (all rows without a plan), 256 rows per chunk. Without the
  // plan's packed rows each chunk packs its own into its thread's buffer
  // (O(threads * 256 * m / 8) bytes, not O(n m / 8)).
  ws.tables.resize(static_cast<size_t>(nibble_table_size(m)));
  nibble_tables(w, m, ws.tables.data());
  const double* T = ws.tables.data();
  constexpr int64_t kChunk = 256;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
  const int ntc = nchunks > 1 ? std::max(nt, 1) : 1;
  if (!packed) ws.packed.resize(static_cast<size_t>(ntc * kChunk * nw));
  const RowsDot dot = rows_dot_kernel();
  for_each_index(ntc, nchunks, [&](int64_t c, int tid) {
    int64_t rows[kChunk];
    int64_t idx[kChunk];  // row in packed, or in this thread's buffer
    double out[kChunk];
    uint64_t* own = packed ? nullptr : ws.packed.data() + tid * kChunk * nw;
    int64_t nr = 0;
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i)
      if (!rep || rep[i] == i) {
        if (own) pack(B + i * m, m, own + nr * nw, nullptr);
        idx[nr] = own ? nr : i;
        rows[nr++] = i;
      }
    dot(own ? own : packed, m, idx, nr, T, out);
    for (int64_t k = 0; k < nr; ++k) s[rows[k]] = out[k];
  });
  if (rep)
    for (int64_t i = 0; i < n; ++i) s[i] = s[rep[i]];
}

}  // namespace

int64_t top_k_count(int64_t n, int64_t top_k) { return (top_k <= 0 || top_k >= n) ? n : top_k; }

namespace {

// Order-preserving unsigned key of a double that is not NaN: for x < y the key of
// x is smaller; -0.0 is mapped to +0.0 so the two compare equal, as doubles do.
// Without a branch, so that a loop of them vectorizes: a select for zero (not
// x + 0.0, which is -0.0 when rounding downward), and a negative x has all its
// bits flipped, a positive one its sign bit set.
inline uint64_t order_key(double x) {
  x = x == 0.0 ? 0.0 : x;
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint64_t negative = uint64_t(0) - (u >> 63);  // all ones or zero
  return u ^ (negative | (uint64_t(1) << 63));
}

inline double key_value(uint64_t k) {
  const uint64_t u = (k >> 63) ? (k & ~(uint64_t(1) << 63)) : ~k;
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Insertion of each pair into the sorted prefix (stable). Stops and returns
// false once more than `budget` elements have been moved (the input was not
// nearly sorted); the pairs are then a permutation of the input.
bool insertion_sort(uint64_t* key, int32_t* idx, int64_t d, int64_t budget) {
  int64_t moved = 0;
  for (int64_t r = 1; r < d; ++r) {
    const uint64_t k = key[r];
    if (key[r - 1] <= k) continue;
    const int32_t v = idx[r];
    int64_t q = r;
    for (; q > 0 && key[q - 1] > k; --q) {
      key[q] = key[q - 1];
      idx[q] = idx[q - 1];
    }
    key[q] = k;
    idx[q] = v;
    moved += r - q;
    if (moved > budget) return false;
  }
  return true;
}

// One stable LSD counting pass on the byte (key >> shift) & 255, from (ks, is)
// into (kd, id).
void radix_pass(const uint64_t* ks, const int32_t* is, int64_t d, int shift, uint64_t* kd,
                int32_t* id) {
  uint32_t pos[256] = {};  // d < 2^31 (rows are checked by the bindings)
  for (int64_t r = 0; r < d; ++r) ++pos[(ks[r] >> shift) & 255];
  uint32_t acc = 0;
  for (int v = 0; v < 256; ++v) {
    const uint32_t c = pos[v];
    pos[v] = acc;
    acc += c;
  }
  for (int64_t r = 0; r < d; ++r) {
    const uint32_t q = pos[(ks[r] >> shift) & 255]++;
    kd[q] = ks[r];
    id[q] = is[r];
  }
}

// Sorts d < kRankSort pairs stably: each key's place is the number of keys
// below it plus the equal keys before it, written to (kd, id). No
// data-dependent branch (insertion into the sorted prefix mispredicts about
// once per key) and a loop the compiler vectorizes: d^2 compares in lanes.
constexpr int64_t kRankSort = 32;

ACES_FAST_KERNEL_BODY void rank_sort_body(const uint64_t* key, const int32_t* idx, int64_t d,
                                          uint64_t* kd, int32_t* id) {
  // key j against every key i in lanes (no horizontal sum per key)
  int64_t below[kRankSort] = {};
  for (int64_t j = 0; j < d; ++j) {
    const uint64_t kj = key[j];
    for (int64_t i = 0; i < d; ++i) below[i] += (kj < key[i]) | ((kj == key[i]) & (j < i));
  }
  for (int64_t i = 0; i < d; ++i) {
    kd[below[i]] = key[i];
    id[below[i]] = idx[i];
  }
}
// (from AVX2 on, rank_by_counts ranks these)
constexpr simd::Dispatched<&rank_sort_body, simd::kAvx2> rank_sort{};

// Up to this many keys radix_sort ranks by less_counts where the level has it
// (AVX2, AVX-512): O(d^2 / 8) compares in lanes without a data-dependent branch, against
// a radix pass whose insertion mispredicts about once per key. Sorting the ACES-C
// scores of 1 000 distinct tasks (AVX-512 Xeon, two runs), per task: 24 keys
// 0.12-0.16 -> 0.06-0.09 us, 100 keys 1.0-1.4 -> 0.7-0.8 us, 128 keys 1.6-2.0 ->
// 1.1 us, 200 keys 3.0-3.9 -> 2.6-2.8 us. The pairs grow as d^2, the passes as
// d, and a call repeated on one matrix (the serving benchmark) lets the branch
// predictor learn the insertion: 200x500 calls were 4-7% slower with the counts.
// A batch of several (different) tasks cannot learn them, so there the counts
// rank up to kRankCountsBatch keys (SortScratch::batch). At the AVX2 level of an
// AMD EPYC (Zen 3), per task, six alternated processes each: ACES-C batches of
// 100x50 5.07-5.36 -> 4.55-4.70 us, 128x300 15.5 -> 14.8-15.6, 200x500
// 31.9-33.3 -> 31.3-32.6, 24x100 2.32-2.40 -> 2.29-2.36; single calls 100x50
// and 128x300 within 3% either way (noise of that host).
constexpr int64_t kRankCounts = 128;
constexpr int64_t kRankCountsBatch = 256;
static_assert(kRankCountsBatch <= kLessCountsMax, "less_counts takes this many keys");

// Sorts d <= kRankCountsBatch pairs stably into (kd, id); false when it stopped
// early, the pairs then a permutation of the input in which equal keys keep
// their order. Counts of smaller high halves place every key in the span of
// those sharing its high half, in index order; insertion then orders each span
// by the whole key (stable), within a budget of 4 d moves. Half the keys' bits:
// sixteen lanes per compare, not eight; and distinct scores rarely share their
// sign, exponent and 20 leading mantissa bits, so most spans hold one key and
// the insertion is skipped when all do. ACES-C, 1 thread, AVX-512 Xeon, share
// of the profile in the sort: 100x50 tasks 20-23% -> 19.5%.
bool rank_by_counts(LessCounts less_counts, const uint64_t* key, const int32_t* idx, int64_t d,
                    uint64_t* kd, int32_t* id) {
  int32_t less[kRankCountsBatch];
  int32_t before[kRankCountsBatch];
  std::fill(before, before + d, 0);  // less[i] < d
  less_counts(key, d, less);
  int32_t shared = 0;  // nonzero once a span holds two keys
  for (int64_t i = 0; i < d; ++i) {
    const int32_t later = before[less[i]]++;
    const int64_t q = less[i] + later;
    shared |= later;
    kd[q] = key[i];
    id[q] = idx[i];
  }
  return shared == 0 || insertion_sort(kd, id, d, 4 * d);
}

// Below this many keys radix_sort makes one radix pass before insertion, not two.
constexpr int64_t kOnePassRadix = 256;

// Sorts the pairs stably by LSD passes over every byte in which the keys
// differ (bytes where all agree need none): any input, equal keys keeping
// their order. key2/idx2: scratch of length d.
void radix_sort_bytes(uint64_t* key, int32_t* idx, int64_t d, uint64_t* key2, int32_t* idx2) {
  uint64_t differ = 0;
  for (int64_t r = 1; r < d; ++r) differ |= key[r] ^ key[0];
  uint64_t* ks = key;
  int32_t* is = idx;
  uint64_t* kd = key2;
  int32_t* id = idx2;
  for (int b = 0; b < 8; ++b) {
    if (((differ >> (8 * b)) & 255) == 0) continue;
    radix_pass(ks, is, d, 8 * b, kd, id);
    std::swap(ks, kd);
    std::swap(is, id);
  }
  if (ks != key) {
    std::memcpy(key, ks, static_cast<size_t>(d) * sizeof(uint64_t));
    std::memcpy(idx, is, static_cast<size_t>(d) * sizeof(int32_t));
  }
}

// Sorts the pairs (key[r], idx[r]), r < d, ascending by key, stably. Short lists
// are ranked: by rank_by_counts (d <= kRankCounts, kRankCountsBatch in a batch)
// from the AVX2 level on, else by rank_sort (d < kRankSort). Otherwise two LSD radix passes on
// the 16 highest bits in which the keys differ (scores spread over those: each
// digit value holds few keys), which leaves the pairs nearly sorted, then
// insertion finishes the order. If that insertion (or rank_by_counts') would
// move more than 4 d elements (many keys agree on those bits), LSD passes over
// every byte in which keys differ sort the rest. Few data-dependent branches,
// so a batch of different tasks does not pay the mispredictions a comparison
// sort of ~d log d / 2 costs. key2/idx2: scratch of length d. O(d) per pass,
// 24 bytes per entry in all. Returns true when the sorted pairs are left in
// (key2, idx2) (a ranking writes them there: copying them back cost a `rep
// movs` start-up per array, 6% of the sort of 100 keys), false when in (key, idx).
bool radix_sort(uint64_t* key, int32_t* idx, int64_t d, uint64_t* key2, int32_t* idx2, bool batch) {
  static const LessCounts less_counts = less_counts_kernel();
  if (less_counts != nullptr && d <= (batch ? kRankCountsBatch : kRankCounts)) {
    if (rank_by_counts(less_counts, key, idx, d, key2, idx2)) return true;
    // a permutation in which equal keys keep their order: sort it by bytes
    radix_sort_bytes(key2, idx2, d, key, idx);
    return true;
  }
  if (d < kRankSort) {
    rank_sort(key, idx, d, key2, idx2);
    return true;
  }
  uint64_t differ = 0;
  for (int64_t r = 1; r < d; ++r) differ |= key[r] ^ key[0];
  if (differ == 0) return false;
  const int top = 63 - portable::clz64(differ);
  if (d < kOnePassRadix) {
    // Few keys: one pass on the 8 highest differing bits already spreads them
    // over 256 buckets (a fraction of a key each), and a second pass would
    // cost its 256-bucket prefix sum again for little.
    radix_pass(key, idx, d, std::max(0, top - 7), key2, idx2);
    if (!insertion_sort(key2, idx2, d, 4 * d)) radix_sort_bytes(key2, idx2, d, key, idx);
    return true;
  }
  const int lo = std::max(0, top - 15);
  radix_pass(key, idx, d, lo, key2, idx2);
  radix_pass(key2, idx2, d, lo + 8, key, idx);
  if (!insertion_sort(key, idx, d, 4 * d)) radix_sort_bytes(key, idx, d, key2, idx2);
  return false;
}

}  // namespace

void snap_and_order(double* s, int64_t n, double tol, const int64_t* rep, int64_t* order,
                    SortScratch& sc) {
  if (n <= 0) return;
  // Sort the distinct rows only: a row with rep[i] != i has its representative's
  // score (identical bytes give identical sums).
  sc.key.resize(static_cast<size_t>(n));
  sc.idx.resize(static_cast<size_t>(n));
  int64_t d = 0;
  {
    uint64_t* kw = sc.key.data();
    int32_t* iw = sc.idx.data();
    if (!rep) {
      for (int64_t i = 0; i < n; ++i) {
        kw[i] = order_key(s[i]);
        iw[i] = static_cast<int32_t>(i);
      }
      d = n;
    } else {
      for (int64_t i = 0; i < n; ++i)
        if (rep[i] == i) {
          kw[d] = order_key(s[i]);
          iw[d++] = static_cast<int32_t>(i);
        }
    }
  }
  sc.key2.resize(static_cast<size_t>(d));
  sc.idx2.resize(static_cast<size_t>(d));
  const bool in_scratch =
      radix_sort(sc.key.data(), sc.idx.data(), d, sc.key2.data(), sc.idx2.data(), sc.batch);
  // Snap and number the groups of equal snapped value, ascending. Without a
  // branch on the comparison: tied scores (repeated rows, equal pass counts)
  // make it as likely as not, a misprediction a tie.
  const uint64_t* key = in_scratch ? sc.key2.data() : sc.key.data();
  const int32_t* idx = in_scratch ? sc.idx2.data() : sc.idx.data();
  sc.group.resize(static_cast<size_t>(n));
  int32_t* group = sc.group.data();
  int32_t g = 0;
  double prev = key_value(key[0]);
  uint64_t run = key[0];  // the key of the group's first score
  group[idx[0]] = 0;
  ahead::Lines* const pf = ahead::pending();
  for (int64_t r = 1; r < d; ++r) {
    if (pf) pf->tick(1);
    const double cur = key_value(key[r]);
    const bool step = cur - prev > tol;  // the comparison of np.diff(sv) > tol
    run = step ? key[r] : run;
    g += step ? 1 : 0;
    prev = cur;
    group[idx[r]] = g;
    s[idx[r]] = key_value(run);
  }
  // Every row sorted and no two tied (ACES-C's usual distinct scores): the
  // order is the sorted list reversed, without the counting sort's passes.
  const bool distinct = !rep && g + 1 == d;
  if (distinct)
    for (int64_t r = 0; r < d; ++r) order[r] = idx[d - 1 - r];
  if (n >= kReleaseRows) {
    release(sc.key2);
    release(sc.idx2);
  }
  if (distinct) return;
  if (rep)
    for (int64_t i = 0; i < n; ++i) {
      group[i] = group[rep[i]];
      s[i] = s[rep[i]];
    }
  // Counting sort of the rows by group, highest group first; rows enter in
  // ascending index, so ties come out by lower index. O(n + groups).
  const int64_t ng = static_cast<int64_t>(g) + 1;
  sc.start.assign(static_cast<size_t>(ng) + 1, 0);
  int64_t* start = sc.start.data();
  for (int64_t i = 0; i < n; ++i) ++start[ng - group[i]];
  for (int64_t q = 0; q < ng; ++q) start[q + 1] += start[q];
  for (int64_t i = 0; i < n; ++i) order[start[ng - 1 - group[i]]++] = i;
}

// dedup_pays_for_loo, except where the LOO-AUC reads packed words: that
// kernel is so much cheaper than the bytes one that the hash pass only pays for
// long rows (what a repeated row saves grows with m, what hashing it costs much
// less). ACES-C, 1 thread, AVX2 EPYC, dedup off / on, no repeats and half the
// rows repeated: 100x50 4.7 / 5.6 and 5.5 / 6.3 us; 360x100 18.9 / 21.2 and
// 21.2 / 22.5; 100x200 12.1 / 13.0 and 10.9 / 10.8; 50x1000 20.6 / 21.4 and
// 20.9 / 19.2; 200x500 31.0 / 32.1 and 33.0 / 29.2.
bool dedup_pays_for_aces_c(int64_t n, int64_t m) {
  if (loo_auc_reads_words(n) && (m < 256 || n * m < 32768)) return false;
  return dedup_pays_for_loo(n, m);
}

bool runs_from_words(const MethodParams& p, int64_t n) {
  // ACES-C reads B in the uniform LOO-AUC only (total multiplicity n); the
  // scores and the dedup pass use the packed rows, the fallback the column sums.
  // CodeT needs the packed rows only (run_codet), and so does majority vote
  // (majority_weights_words, then the scores).
  if (p.method == kMethodCodet || p.method == kMethodMajority) return n > 0;
  return (p.method == kMethodAcesC || p.method == kMethodAcesCFilter) && n > 0 &&
         loo_auc_reads_words(n);
}

namespace {

// CodeT (docs/contract.rst §3, _semantics.codet): the consensus sets are the
// classes of identical rows over the non-constant tests, and a constant test
// is the same in every row, so the classes of whole rows are the same sets
// (dedup_rows, which packs and checks the rows in the same pass). A row scores
// (its passes of non-constant tests) * (its set's size) ** exponent: its passes
// less the tests every row passes, times p.power[size] (NumPy's rounding of the
// power), one float64 product as the semantics' `to_float(passed) * power`.
// Order: stable descending (snap_and_order with tol 0 snaps nothing: only
// equal scores share a group). O(n m / 64) after the packing pass, O(n) after.
void run_codet(const uint8_t* B, int64_t n, int64_t m, const MethodParams& p, MethodOutput& out,
               MethodWorkspace& ws, bool par, int n_threads, bool words_ready) {
  if (p.power == nullptr || p.power_len <= n)
    throw std::invalid_argument("codet: the power table needs n + 1 = " + std::to_string(n + 1) +
                                " entries, got " + std::to_string(p.power ? p.power_len : 0));
  uint8_t high = 0;
  dedup_rows(B, n, m, nullptr, ws.plan, par, n_threads, &high, true, words_ready);
  if (high) {
    out.not_binary = true;
    return;
  }
  // the tests every row passes: the AND of all rows' words (unused bits are 0)
  const int64_t nw = (m + 63) / 64;
  ws.mask.resize(static_cast<size_t>(nw));
  and_or_rows(ws.plan.words.data(), n, nw, ws.mask.data(), nullptr);
  const int64_t everyone = bits::count_words(ws.mask.data(), nw);
  const int64_t* rep = ws.plan.rep.data();
  const int64_t* counts = ws.plan.counts.data();
  const int64_t* rowsum = ws.plan.rowsum.data();
  for (int64_t i = 0; i < n; ++i)
    out.scores[i] = static_cast<double>(rowsum[i] - everyone) * p.power[counts[rep[i]]];
  snap_and_order(out.scores, n, 0.0, ws.plan.distinct < n ? rep : nullptr, out.order, ws.sort);
  if (n >= kReleaseRows) release_dedup_scratch(ws.plan);
}

}  // namespace

void run_method(const uint8_t* B, int64_t n, int64_t m, const MethodParams& p, MethodOutput& out,
                MethodWorkspace& ws, bool parallel, int n_threads, bool words_ready) {
  out.fallback = false;
  out.not_binary = false;
  const bool par = parallel && n * m >= kMinParallelCells;
  const int nt = threads_for_work(par ? n * m : 0, n_threads);
  if (p.method == kMethodCodet) {
    run_codet(B, n, m, p, out, ws, par, nt, words_ready);
    return;
  }
  const bool is_c = p.method == kMethodAcesC || p.method == kMethodAcesCFilter;
  const bool is_o = p.method == kMethodAcesO;
  const bool need_loo = is_c || (is_o && p.warm);

  bool use_dedup;
  if (p.dedup >= 0)
    use_dedup = p.dedup > 0;
  else if (is_o)
    use_dedup = true;
  else if (is_c)
    use_dedup = dedup_pays_for_aces_c(n, m);
  else
    use_dedup = false;
  use_dedup = use_dedup && n > 1;

  const int64_t* cnt = nullptr;      // class multiplicities (dedup found repeats)
  const int64_t* rep = nullptr;      // class representative of every row
  const int64_t* rowsum = nullptr;   // passes per row
  const uint64_t* packed = nullptr;  // every row's packed pattern (small inputs)
  const bool big = n >= kReleaseRows;
  uint8_t high = 0;
  if (use_dedup) {
    // the packed rows feed the scores too, while they are small next to the
    // O(n + m) the rest of the call needs (else the scores pack their own)
    const bool keep = words_ready || n * ((m + 63) / 64) <= kKeepPackedWords;
    // the uniform LOO-AUC takes its levels from the rows grouped by sum
    dedup_rows(B, n, m, nullptr, ws.plan, par, n_threads, &high, keep, words_ready, need_loo);
    packed = keep ? ws.plan.words.data() : nullptr;
    rowsum = ws.plan.rowsum.data();
    if (ws.plan.distinct < n) {
      cnt = ws.plan.counts.data();
      rep = ws.plan.rep.data();
    }
    if (big) {
      release_dedup_scratch(ws.plan);
      if (!cnt) {
        release(ws.plan.counts);
        release(ws.plan.rep);
      }
    }
  } else if (words_ready) {
    packed = ws.plan.words.data();
  } else if ((p.method == kMethodMajority || (is_c && loo_auc_reads_words(n))) &&
             n * ((m + 63) / 64) <= kKeepPackedWords) {
    // One packing pass serves the 0/1 check, the LOO-AUC's row sums and its
    // kernel of packed words (ACES-C), the constant tests (majority vote),
    // and the scores, each of which would otherwise read the bytes once more.
    const int64_t nw = (m + 63) / 64;
    ws.plan.words.resize(static_cast<size_t>(n * nw));
    ws.plan.rowsum.resize(static_cast<size_t>(n));
    const PackRow pack = pack_row_kernel();
    for (int64_t i = 0; i < n; ++i)
      ws.plan.rowsum[i] = pack(B + i * m, m, ws.plan.words.data() + i * nw, &high);
    packed = ws.plan.words.data();
    rowsum = ws.plan.rowsum.data();
  } else {
    high = max_byte(B, n * m) > 1 ? 1 : 0;
  }
  if (high) {
    out.not_binary = true;
    return;
  }

  const size_t mm = static_cast<size_t>(m);
  ws.colsum.resize(mm);
  ws.w.resize(mm);
  int64_t* colsum = ws.colsum.data();
  double* w = ws.w.data();

  // Uniform LOO-AUC (need_loo: ACES-C, and the ACES-O warm start) gives the
  // column sums for free; otherwise count them.
  double* L = nullptr;
  if (need_loo) {
    if (is_c) {
      L = out.loo;
    } else {
      ws.L.resize(mm);
      L = ws.L.data();
    }
    const int32_t* by_sum = use_dedup && ws.plan.grouped ? ws.plan.order.data() : nullptr;
    loo_auc_uniform_ex(B, n, m, cnt, rowsum, L, colsum, par, n_threads, ws.uni, packed, by_sum);
    if (big) ws.uni.release();
  } else if (!(p.method == kMethodMajority && packed)) {
    column_sums(B, n, m, cnt, colsum, ws.acc32, ws.acc8);
  }
  if (interrupt::cancelled()) return;  // the caller discards the outputs

  if (p.method == kMethodMajority) {
    const double count = packed ? majority_weights_words(packed, n, m, w, ws.words, ws.mask)
                                : majority_weights(colsum, n, m, w);
    normalize_by(w, m, count, out.weights);
  } else if (is_c) {
    double total;
    out.fallback = aces_c_weights(L, colsum, n, m, p.method == kMethodAcesC, w, &total);
    normalize_by(w, m, total, out.weights);
  } else {
    // ACES-O
    ws.active.resize(mm);
    ws.logits.assign(mm, 0.0);
    for (int64_t j = 0; j < m; ++j) ws.active[j] = nonconstant(colsum[j], n) ? 1 : 0;
    if (p.warm) {
      double total;
      aces_c_weights(L, colsum, n, m, true, w, &total);
      normalize_by(w, m, total, w);
      for (int64_t j = 0; j < m; ++j)
        if (ws.active[j]) ws.logits[j] = std::log(w[j] + kWarmEps);
    }
    const int64_t k = top_k_count(n, p.top_k);
    if (k < n && !rowsum) {
      ws.rs.resize(static_cast<size_t>(n));
      row_sums(B, n, m, ws.rs.data());
      rowsum = ws.rs.data();
    }
    select_top_rows(rowsum, n, m, k, out.rows, ws.hist);
    // Rows outside the top k get count 0 (no submatrix copy); repeats inside it
    // are merged onto their class representative.
    const int64_t* ck = nullptr;
    if (k < n) {
      ws.ck.assign(static_cast<size_t>(n), 0);
      for (int64_t r = 0; r < k; ++r) ws.ck[rep ? rep[out.rows[r]] : out.rows[r]] += 1;
      ck = ws.ck.data();
    } else {
      ck = cnt;
    }
    ws.wfit.resize(mm);
    aces_o_fit(B, n, m, ws.logits.data(), ws.active.data(), p.gamma, p.lr, p.steps, ck,
               ws.wfit.data(), out.objective, parallel, n_threads);
    if (interrupt::cancelled()) return;
    normalize(ws.wfit.data(), m, out.weights);
  }

  scores(B, n, m, out.weights, rep, packed, out.scores, ws, nt);
  if (big) {
    release(ws.plan.words);
    release(ws.packed);
    release(ws.tables);
    release(ws.stmp);
    release(ws.rs);
    release(ws.passes);
    release(ws.ck);
    release(ws.plan.counts);
    release(ws.plan.rowsum);
  }
  const double wsum = sum32(out.weights, m);
  snap_and_order(out.scores, n, p.tie_tol * wsum, rep, out.order, ws.sort);  // reads rep
  if (big) {
    release(ws.plan.rep);
    release(ws.sort.key);
    release(ws.sort.idx);
    release(ws.sort.group);
    release(ws.sort.start);
  }
}

}  // namespace aces_fast
