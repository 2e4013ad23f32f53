// Row deduplication: identical candidate rows collapsed into one row with a
// multiplicity, without copying the matrix (row indices + counts only).
//
// Rows are compared as 0/1 patterns (any nonzero byte is a pass, the kernels'
// convention), hashed to 64 bits and inserted into an open-addressing table;
// equal hashes are confirmed by comparing the rows, so a hash collision can
// never merge two different rows. When the packed rows are kept (small
// matrices), rows are first grouped by their number of passes, and only rows
// of one group can be equal: small groups are compared row by row, large ones
// hashed.
#pragma once

#include <cstdint>
#include <vector>

namespace aces_fast {

// Result of dedup_rows; the vectors are reused across calls (no reallocation
// when a later problem is not larger).
struct RowPlan {
  std::vector<int64_t> counts;  // (n) total multiplicity at a class's first row, 0 elsewhere
  std::vector<int64_t> rep;     // (n) first row of i's class; -1 for rows with input count 0
  std::vector<int64_t> rowsum;  // (n) number of passes of every row
  std::vector<uint64_t> hash;   // (n) scratch: 64-bit hashes of the rows' 0/1 patterns
  std::vector<int32_t> table;   // open-addressing slots (row index or -1)
  std::vector<int32_t> order;   // (n) rows grouped by row sum (grouped route's scratch)
  std::vector<int32_t> group;   // group bounds by row sum (grouped route's scratch)
  // (n * ceil(m / 64)) every row's packed 0/1 pattern (simd.hpp's PackRow),
  // row-major; filled only when dedup_rows is asked to keep it, else empty
  std::vector<uint64_t> words;
  int64_t distinct = 0;  // number of classes (rows with count > 0 that are first)
  // order holds every row in ascending order of rowsum (equal sums by index):
  // the last dedup_rows took the grouped route and its scratch is not released
  bool grouped = false;
};

// 64-bit hash of row i's 0/1 pattern and its number of passes, for every row;
// when high is not null, *high = 1 if a byte is neither 0 nor 1 (else left);
// when words is not null, row i's packed pattern goes to words[i * ceil(m / 64) ..]
// (the hash is formed from it anyway; keeping it spares a caller a second pass
// over B). O(n m); OpenMP over rows when parallel.
// words_ready: words already holds every row's packed pattern (B's bytes are
// known to be 0/1): the rows are hashed and counted from it, B is not read.
void hash_rows(const uint8_t* B, int64_t n, int64_t m, uint64_t* hash, int64_t* rowsum,
               bool parallel, int n_threads, uint8_t* high = nullptr, uint64_t* words = nullptr,
               bool words_ready = false);

// True iff rows a and b (length m) have the same 0/1 pattern.
bool rows_equal(const uint8_t* a, const uint8_t* b, int64_t m);

// Free the scratch that only dedup_rows itself needs (hash, table).
void release_dedup_scratch(RowPlan& plan);

// Group identical rows. counts_in (nullable, length n, >= 0) are input
// multiplicities (a row with count 0 is absent); a class's multiplicity is the
// sum of its rows' counts, stored at the class's first row with count > 0.
// Fills plan.counts, plan.rep, plan.rowsum; returns plan.distinct.
// by_sum (with keep_words, on one thread): group the rows by row sum first
// and leave them in that order in plan.order (plan.grouped), for a caller
// whose next step needs that order (loo_auc_uniform_ex's by_sum); a caller
// without that use hashes every row, which is cheaper than the grouping for
// short rows (CodeT on 24x100 tasks, noisy host: 1.1-1.2 us a task against 1.6-1.9).
// high: as for hash_rows (the 0/1 check in the same pass over B). keep_words:
// also fill plan.words (else it is left empty).
// O(n m) hashing (parallel over rows) plus an O(n) expected-time table pass.
// Requires n < 2^31. Memory: 32 bytes per row plus 8 per table slot (< 4 n),
// plus m / 8 bytes per row with keep_words.
// words_ready (with keep_words): plan.words already holds the packed rows of B
// (n * ceil(m / 64) words, B's bytes 0/1), e.g. from bit-packed input; they are
// hashed as they are, and B may be null. With keep_words, rows whose hashes
// agree are compared by their words, else by their bytes.
int64_t dedup_rows(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts_in, RowPlan& plan,
                   bool parallel, int n_threads, uint8_t* high = nullptr, bool keep_words = false,
                   bool words_ready = false, bool by_sum = false);

// dedup = 1 / 0 force it on / off; -1 (auto) applies the rule of each caller:
// worth it when the work after it grows faster than O(n m) in the row count
// (surrogate, ACES-O: always) or when the matrix is big enough that the extra
// hashing pass is small next to the work it can save (LOO-AUC, ACES-C).
bool dedup_pays_for_loo(int64_t n, int64_t m);

}  // namespace aces_fast
