// Hand-vectorized kernels (AVX-512 / AVX2 intrinsics with portable fallbacks,
// one variant per process chosen by simd/dispatch.hpp). GCC does not find these
// instruction sequences itself (byte-to-int32 widening into masked adds, byte
// compares into bit masks); written out they are several times faster.
// Every variant of a kernel returns bitwise the same result.
#pragma once

#include <cstdint>

namespace aces_fast {

// One level of uniform_block with uint32 accumulators (see loo_auc.cpp) over the
// columns [0, len) of a block, for the widest len <= bw the kernel handles
// (AVX-512: all bw columns, the tail through masks; AVX2: a multiple of 8);
// returns len.
// For every handled column jj, with p the count-weighted passers among the
// level's rows row_of[rbeg..rend) in column col0 + jj:
//   acc[jj] += p (a + p + (adjacent ? prev[jj] : 0)),  Ptot[jj] += p,  cur[jj] = p
// (uint32 arithmetic modulo 2^32). Reads exactly B[row, col0 .. col0 + len).
using UniformLevelStep = int64_t (*)(const uint8_t* B, int64_t m, const int64_t* counts,
                                     const int64_t* row_of, int64_t rbeg, int64_t rend,
                                     int64_t col0, int64_t bw, uint32_t a, bool adjacent,
                                     const int32_t* prev, int32_t* cur, uint32_t* acc,
                                     uint32_t* Ptot);

// The step of this process's SIMD level, or nullptr at level "none".
UniformLevelStep uniform_level_step();

// A whole column block of the uniform LOO-AUC kernel with uint32 accumulators
// (see loo_auc.cpp), the levels' sums kept in registers 64 columns at a time.
// Levels k < nlev: rows row_of[lstart[k] .. lstart[k + 1]), multiplier
// a[k] (uint32), adjacent[k] (level k - 1 has score one less). For every column
// jj < bw of the block at col0, with P the count-weighted passers and tot the
// total multiplicity: out[jj] = (acc - P^2) / (2 P (tot - P)) (NaN when P or
// tot - P is 0), acc = sum_k p_k (a_k + p_k + (adjacent ? p_{k-1} : 0)) modulo
// 2^32; colsum[jj] = P when colsum is not null. Reads exactly B[row, col0 ..
// col0 + bw) of the listed rows.
using UniformBlock = void (*)(const uint8_t* B, int64_t m, const int64_t* counts,
                              const int64_t* row_of, const int64_t* lstart, const uint32_t* a,
                              const uint8_t* adjacent, int64_t nlev, uint32_t tot, int64_t col0,
                              int64_t bw, double* out, int64_t* colsum);

// The block kernel of this process's SIMD level for a total multiplicity tot:
// AVX-512 always; AVX2 while tot <= 361 (16-bit lanes); else nullptr.
UniformBlock uniform_block_kernel(uint32_t tot);

// UniformBlock reading each listed row's packed words (words + row * nw; bit
// j % 64 of word j / 64 = column j, bits past m 0) instead of its bytes, col0 a
// multiple of 64; the same outputs. Reads one word per row and 64 columns.
using UniformBlockWords = void (*)(const uint64_t* words, int64_t nw, const int64_t* counts,
                                   const int64_t* row_of, const int64_t* lstart, const uint32_t* a,
                                   const uint8_t* adjacent, int64_t nlev, uint32_t tot,
                                   int64_t col0, int64_t bw, double* out, int64_t* colsum);

// The words kernel for a total multiplicity tot: AVX-512 or AVX2 while tot <=
// 361 (16-bit lanes), else nullptr (a caller then unpacks the rows for
// UniformBlock).
UniformBlockWords uniform_block_words_kernel(uint32_t tot);

// Sum of x[0 .. m) in a fixed association: 32 partial sums (partial l adds the
// x[j] with j = l (mod 32) in ascending order), combined pairwise (partial l +=
// partial l + h for h = 16, 8, 4, 2, 1). A sequential sum is a chain of m
// dependent adds (m times the add latency); these run 32 at a time in vectors,
// with the same bits at every SIMD level (adds only, in the same order).
double sum32(const double* x, int64_t m);

// Packs a row of m bytes into ceil(m / 64) words (bit j % 64 of word j / 64 is
// set iff row[j] != 0; unused high bits 0) and returns its number of passes.
// When high is not null, sets *high = 1 if a byte is neither 0 nor 1 (leaves it
// otherwise): the 0/1 check of a caller that reads the whole matrix here anyway.
// Reads exactly row[0 .. m).
using PackRow = int64_t (*)(const uint8_t* row, int64_t m, uint64_t* words, uint8_t* high);
PackRow pack_row_kernel();  // never null

// out[i] = the set bits of row i's nw words (rows of packed pass bits, row i at
// words[i * nw]) for i < n, those under mask (nw words) when mask is not null:
// the row sums of rows that were packed earlier, or their passes of the tests
// a mask selects. With the POPCNT instruction from the AVX2 level on (every
// AVX2 CPU has it; the portable variant counts in SWAR, as bits::popcount64
// does in a baseline build); the same counts at every level.
using CountRows = void (*)(const uint64_t* words, int64_t n, int64_t nw, const uint64_t* mask,
                           int64_t* out);
CountRows count_rows_kernel();  // never null

// Scores of rows by nibble tables. Columns go in groups of four (group g holds
// the columns 4g .. 4g + 3 < m); its table has one entry per 4-bit pattern b:
//   T[16 g] = +0.0,  T[16 g + b] = T[16 g + (b without its highest bit h)] + w[4 g + h]
// (the weights of the set bits added in ascending column order). A row's score
// is, for each 64-column word q of its packed pattern, the entries of the word's
// groups (nibble t of the word indexes group 16 q + t) added in ascending t
// starting from the first, then those word sums added in ascending q onto +0.0.
// The adds are the same whatever the vector width, so every kernel variant gives
// the same bits; the error is at most (16 + ceil(m / 64)) roundings of the sum.
// nibble_tables fills T (nibble_table_size(m) doubles) from w (m finite weights
// >= 0), reading exactly w[0 .. m).
inline int64_t nibble_table_size(int64_t m) { return 16 * ((m + 3) / 4); }
void nibble_tables(const double* w, int64_t m, double* T);

// out[k] = the score of row rows[k] whose packed pattern (PackRow's words: bit
// j % 64 of word j / 64, unused high bits 0) is words[rows[k] * nw ..], nw =
// ceil(m / 64); 0.0 when m == 0. Reads exactly those rows' nw words and
// T[0 .. nibble_table_size(m)).
using RowsDot = void (*)(const uint64_t* words, int64_t m, const int64_t* rows, int64_t nrows,
                         const double* T, double* out);
RowsDot rows_dot_kernel();  // never null

// Counts of smaller high halves: less[i] = #{j < d : hi(key[j]) < hi(key[i])}
// (unsigned, hi the top 32 bits) for every i < d, by comparing every pair in
// sixteen lanes: O(d^2 / 16) compares without a data-dependent branch. Reads
// exactly key[0 .. d), writes exactly less[0 .. d). The rank sort places each
// key in the span of those sharing its high half, then orders the spans
// (rank_by_counts in methods.cpp).
using LessCounts = void (*)(const uint64_t* key, int64_t d, int32_t* less);
constexpr int64_t kLessCountsMax = 256;  // the largest d a LessCounts takes
// AVX-512 (sixteen lanes) and AVX2 (eight: the high halves, sign-flipped for
// AVX2's signed compare), else nullptr. On an AVX-512 Xeon the AVX2 variant
// came within 1-2% of the radix path; on an AVX2 EPYC (Zen 3), where the radix
// path's insertion costs more, it made 100x50 ACES-C batches 10-12% faster
// (methods.cpp, kRankCounts). Takes d <= kLessCountsMax.
LessCounts less_counts_kernel();

// kLaneMask4[b][l] = all ones where bit l of the 4-bit pattern b is set, else 0:
// the lane masks of four 64-bit lanes, for AVX2 kernels that select w or +0.0 by
// a nibble of pass bits (the surrogate's masked sums).
alignas(32) extern const uint64_t kLaneMask4[16][4];

// Largest byte of p[0 .. len) (0 when len == 0); portable and AVX2 variants.
// Lets Python check that a uint8 pass matrix holds only 0 and 1 without NumPy's
// reduction overhead.
uint8_t max_byte(const uint8_t* p, int64_t len);

// The instruction set every dispatched kernel uses (simd/dispatch.hpp):
// "avx512", "avx2" or "none" (portable). Capped by the environment variable
// ACES_FAST_SIMD=avx512|avx2|none, read once per process.
const char* simd_level();

}  // namespace aces_fast
