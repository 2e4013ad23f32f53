// Row deduplication (see dedup.hpp).
//
// A row is first reduced to pass bits, 64 columns per 64-bit word (simd.hpp:
// one AVX-512 byte test or two AVX2 compare + movemask per word, a byte loop
// elsewhere). The words feed a
// multiply-xorshift hash chain and a popcount (the row sum comes for free); the
// chain costs one multiply per 64 columns, so hashing reads the row about as
// fast as a plain row sum does.
#include "kernels/dedup.hpp"

#include "kernels/ahead.hpp"

#include "kernels/bits.hpp"
#include "kernels/kernels.hpp"
#include "simd/simd.hpp"

#include <algorithm>
#include <cstring>

namespace aces_fast {

namespace {

using bits::pass_bits;

// Hash of a row's packed pass bits (nw words): a chain of hash_step from
// hash_start, then mix64.
inline uint64_t hash_start(int64_t m) { return 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(m); }

inline uint64_t hash_step(uint64_t h, uint64_t word) {
  h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
  return h ^ (h >> 32);
}

inline uint64_t words_hash(const uint64_t* words, int64_t nw, int64_t m) {
  uint64_t h = hash_start(m);
  for (int64_t q = 0; q < nw; ++q) h = hash_step(h, words[q]);
  return bits::mix64(h);
}

inline uint64_t next_pow2(uint64_t x) {
  uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

bool rows_equal(const uint8_t* a, const uint8_t* b, int64_t m) {
  if (std::memcmp(a, b, static_cast<size_t>(m)) == 0) return true;
  // bytes differ; the 0/1 patterns may still agree (e.g. 1 vs 255)
  for (int64_t j = 0; j < m; j += 64) {
    const int64_t len = std::min<int64_t>(64, m - j);
    if (pass_bits(a + j, len) != pass_bits(b + j, len)) return false;
  }
  return true;
}

void hash_rows(const uint8_t* B, int64_t n, int64_t m, uint64_t* hash, int64_t* rowsum,
               bool parallel, int n_threads, uint8_t* high, uint64_t* words_out, bool words_ready) {
  const int nt = threads_for_work(parallel ? n * m : 0, n_threads);
  const PackRow pack = pack_row_kernel();
  const CountRows count_rows = count_rows_kernel();
  const int64_t nwm = (m + 63) / 64;
  // Four rows at a time: their hash chains (a multiply per word each) are
  // independent, so they run interleaved instead of one latency after another.
  constexpr int64_t kRows = 4;
  const size_t scratch = words_out ? 0 : static_cast<size_t>(kRows * std::max<int64_t>(nwm, 1));
  const int64_t ngroups = (n + kRows - 1) / kRows;
  auto group = [&](int64_t g, uint64_t* own, uint8_t* hi) {
    const int64_t i0 = g * kRows, nr = std::min(kRows, n - i0);
    // the caller's rows when it keeps them, else scratch; stride ceil(m / 64)
    uint64_t* words = words_out ? words_out + i0 * nwm : own;
    if (words_ready)
      count_rows(words, nr, nwm, nullptr, rowsum + i0);
    else
      for (int64_t k = 0; k < nr; ++k)
        rowsum[i0 + k] = pack(B + (i0 + k) * m, m, words + k * nwm, hi);
    if (nr == kRows) {
      uint64_t h[kRows];
      for (int64_t k = 0; k < kRows; ++k) h[k] = hash_start(m);
      for (int64_t q = 0; q < nwm; ++q)
        for (int64_t k = 0; k < kRows; ++k) h[k] = hash_step(h[k], words[k * nwm + q]);
      for (int64_t k = 0; k < kRows; ++k) hash[i0 + k] = bits::mix64(h[k]);
    } else {
      for (int64_t k = 0; k < nr; ++k) hash[i0 + k] = words_hash(words + k * nwm, nwm, m);
    }
  };
  // one thread: no OpenMP region at all (see for_each_index)
  if (nt <= 1) {
    std::vector<uint64_t> words(scratch);
    for (int64_t g = 0; g < ngroups; ++g) group(g, words.data(), high);
    return;
  }
#ifdef _OPENMP
  uint8_t any_high = 0;
#pragma omp parallel num_threads(nt) reduction(| : any_high)
  {
    std::vector<uint64_t> words(scratch);
    uint8_t mine = 0;
#pragma omp for schedule(static)
    for (int64_t g = 0; g < ngroups; ++g) group(g, words.data(), high ? &mine : nullptr);
    any_high |= mine;
  }
  if (high && any_high) *high = 1;
#endif
}

namespace {

// Largest group of equal row sums whose rows are compared with each other
// directly (at most 120 comparisons, most decided by the first word); larger
// groups are hashed. 16, not 8: the distinct-row 200x500 matrices' groups of
// 9-15 rows compare faster than they hash (an eight-word multiply chain a row):
// ACES-C 1.2% faster a task, in cache, alternated in one process.
constexpr int64_t kPairwiseGroup = 16;

// Finds row i's class among the rows already placed: appends it as a new class
// or merges it into an equal earlier row (multiplicity c > 0). The probe
// sequence is that of dedup_rows's table.
template <class Equal>
inline void place(int64_t i, int64_t c, uint64_t h, const uint64_t* hash, int32_t* table,
                  uint64_t mask, int64_t* counts, int64_t* rep, int64_t& distinct,
                  const Equal& equal) {
  for (uint64_t slot = h & mask;; slot = (slot + 1) & mask) {
    const int64_t r = table[slot];
    if (r < 0) {
      table[slot] = static_cast<int32_t>(i);
      rep[i] = i;
      counts[i] = c;
      ++distinct;
      return;
    }
    if (hash[r] == h && equal(r, i)) {
      rep[i] = r;
      counts[r] += c;
      return;
    }
  }
}

// dedup_rows for rows already packed into words (row-major, nw per row) with
// their row sums: rows of different sums differ, so the rows are grouped by
// their sum (a stable counting sort) and only rows of one group are compared;
// a group of at most kPairwiseGroup rows word by word, a larger one through the
// hash table. A distinct-row 200x500 matrix (benchmarks' planted model) has
// 61-71 groups of at most 15 rows, and most rows of a group differ in their
// first word: the comparisons cost a fraction of hashing every row (its
// multiply chain was about 8% of an ACES-C task). The classes, representatives
// (a class's first row in index order) and multiplicities are those of the
// hashing route; the order by sum is kept for the LOO-AUC's levels.
int64_t dedup_grouped(int64_t n, int64_t m, const int64_t* counts_in, RowPlan& plan) {
  const int64_t nw = (m + 63) / 64;
  const uint64_t* words = plan.words.data();
  const int64_t* rs = plan.rowsum.data();
  int64_t* counts = plan.counts.data();
  int64_t* rep = plan.rep.data();
  int64_t vmin = m, vmax = 0;
  for (int64_t i = 0; i < n; ++i) {
    vmin = std::min(vmin, rs[i]);
    vmax = std::max(vmax, rs[i]);
  }
  // start[v - vmin]: the group of sum v's first slot in order (then its end)
  const size_t range = static_cast<size_t>(vmax - vmin + 1);
  plan.group.assign(range + 1, 0);
  plan.order.resize(static_cast<size_t>(n));
  int32_t* start = plan.group.data();
  int32_t* order = plan.order.data();
  for (int64_t i = 0; i < n; ++i) ++start[rs[i] - vmin + 1];
  for (size_t v = 0; v < range; ++v) start[v + 1] += start[v];
  for (int64_t i = 0; i < n; ++i) order[start[rs[i] - vmin]++] = static_cast<int32_t>(i);
  // start[v] is now the end of group v, start[v - 1] its beginning

  // rows of one sum that differ mostly differ in their first word already
  auto equal = [&](int64_t r, int64_t i) {
    return words[r * nw] == words[i * nw] &&
           std::memcmp(words + r * nw, words + i * nw, static_cast<size_t>(nw) * 8) == 0;
  };
  int32_t* table = nullptr;
  uint64_t mask = 0;
  uint64_t* hash = nullptr;
  int64_t distinct = 0;
  ahead::Lines* const pf = ahead::pending();
  int64_t beg = 0;
  for (size_t v = 0; v < range; ++v) {
    const int64_t end = start[v];
    if (pf) pf->tick(1);
    const bool small = end - beg <= kPairwiseGroup;
    uint64_t seen = 0;  // bit k: a class head of this group has first-word key k
    if (!small && !table) {
      // Load factor <= 1/2: expected O(1) probes per row.
      const uint64_t cap = next_pow2(2 * static_cast<uint64_t>(n));
      mask = cap - 1;
      plan.table.assign(static_cast<size_t>(cap), int32_t(-1));
      plan.hash.resize(static_cast<size_t>(n));
      table = plan.table.data();
      hash = plan.hash.data();
    }
    for (int64_t t = beg; t < end; ++t) {
      const int64_t i = order[t];
      const int64_t c = counts_in ? counts_in[i] : 1;
      counts[i] = 0;
      if (c <= 0) {
        rep[i] = -1;
        continue;
      }
      if (!small) {
        hash[i] = words_hash(words + i * nw, nw, m);
        place(i, c, hash[i], hash, table, mask, counts, rep, distinct, equal);
        continue;
      }
      // the first equal class head among the group's earlier rows, if any;
      // none when no head so far shares the row's first-word key (most rows
      // of a distinct group), which spares the search and its exit, a branch
      // mispredicted about once a row
      const uint64_t key = uint64_t(1) << ((words[i * nw] * 0x9E3779B97F4A7C15ULL) >> 58);
      int64_t r = i;
      if (seen & key) {
        for (int64_t u = beg; u < t; ++u) {
          const int64_t h = order[u];
          if (rep[h] == h && equal(h, i)) {
            r = h;
            break;
          }
        }
      }
      rep[i] = r;
      if (r == i) {
        counts[i] = c;
        seen |= key;
        ++distinct;
      } else {
        counts[r] += c;
      }
    }
    beg = end;
  }
  return distinct;
}

}  // namespace

int64_t dedup_rows(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts_in, RowPlan& plan,
                   bool parallel, int n_threads, uint8_t* high, bool keep_words, bool words_ready,
                   bool by_sum) {
  const size_t nn = static_cast<size_t>(std::max<int64_t>(n, 0));
  plan.counts.resize(nn);
  plan.rep.resize(nn);
  plan.rowsum.resize(nn);
  plan.distinct = 0;
  plan.grouped = false;
  const int64_t nw = (m + 63) / 64;
  if (keep_words)
    plan.words.resize(nn * static_cast<size_t>(std::max<int64_t>(nw, 0)));
  else
    plan.words.clear();
  if (n <= 0) return 0;
  const bool par = parallel && n * m >= kMinParallelCells;
  if (by_sum && keep_words && m > 0 && !par) {
    // one packing pass (or the caller's words), then the grouped comparison
    int64_t* rowsum = plan.rowsum.data();
    uint64_t* words = plan.words.data();
    if (words_ready) {
      count_rows_kernel()(words, n, nw, nullptr, rowsum);
    } else {
      const PackRow pack = pack_row_kernel();
      for (int64_t i = 0; i < n; ++i) rowsum[i] = pack(B + i * m, m, words + i * nw, high);
    }
    plan.distinct = dedup_grouped(n, m, counts_in, plan);
    plan.grouped = true;
    return plan.distinct;
  }
  plan.hash.resize(nn);
  hash_rows(B, n, m, plan.hash.data(), plan.rowsum.data(), par, n_threads, high,
            keep_words ? plan.words.data() : nullptr, keep_words && words_ready);

  // Load factor <= 1/2: expected O(1) probes per row.
  const uint64_t cap = next_pow2(2 * static_cast<uint64_t>(n));
  const uint64_t mask = cap - 1;
  plan.table.assign(static_cast<size_t>(cap), int32_t(-1));
  int32_t* table = plan.table.data();
  int64_t* counts = plan.counts.data();
  int64_t* rep = plan.rep.data();
  const uint64_t* hash = plan.hash.data();
  int64_t distinct = 0;
  const uint64_t* words = keep_words ? plan.words.data() : nullptr;
  auto equal = [&](int64_t r, int64_t i) {
    if (m <= 0) return true;  // (B and words may then be null)
    return words ? std::memcmp(words + r * nw, words + i * nw, static_cast<size_t>(nw) * 8) == 0
                 : rows_equal(B + r * m, B + i * m, m);
  };
  ahead::Lines* const pf = ahead::pending();
  for (int64_t i = 0; i < n; ++i) {
    if (pf) pf->tick(1);
    const int64_t c = counts_in ? counts_in[i] : 1;
    counts[i] = 0;
    if (c <= 0) {
      rep[i] = -1;
      continue;
    }
    place(i, c, hash[i], hash, table, mask, counts, rep, distinct, equal);
  }
  plan.distinct = distinct;
  return distinct;
}

void release_dedup_scratch(RowPlan& plan) {
  std::vector<uint64_t>().swap(plan.hash);
  std::vector<int32_t>().swap(plan.table);
  std::vector<int32_t>().swap(plan.order);
  std::vector<int32_t>().swap(plan.group);
  plan.grouped = false;
}

bool dedup_pays_for_loo(int64_t n, int64_t m) {
  // The hash pass replaces the row-sum pass the uniform kernel needs anyway
  // (about 1.5x its cost), so dedup costs a few percent when no row repeats and
  // saves up to half of the work when rows repeat 2x (200 x 500, AMD EPYC:
  // ACES-C 37 -> 33 us without repeats, 54 -> 40 us with). Below a few thousand
  // cells the table set-up is not repaid.
  return n >= 8 && n * std::max<int64_t>(m, 1) >= 4096;
}

}  // namespace aces_fast
