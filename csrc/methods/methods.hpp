// Whole ranking methods of one task in C++ (docs/contract.rst §3): majority vote,
// ACES-C (weighted / filter, with the majority fallback), ACES-O (top-k
// prefilter, uniform or ACES-C warm start) and CodeT (consensus sets, no test
// weights). The NumPy glue of
// aces_fast/backends/base.py defines the results; this reproduces it:
//   * weights normalized to sum 1 (all zeros when none is positive);
//   * scores s = B w (to rounding: simd.hpp's RowsDot fixes the association);
//   * ties snapped like base.snap_ties: sort ascending, every run of neighbours
//     whose consecutive differences are <= tol = tie_tol * sum(w) gets the run's
//     smallest value;
//   * order: stable descending sort of the scores (ties by lower index).
// Everything works on the caller's matrix in place (no copy of B: the top-k
// submatrix and duplicate rows are expressed as row counts), writes into
// caller-allocated outputs and keeps its scratch in a reusable workspace, so a
// batch driver pays no allocation per task once the workspace has grown.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/dedup.hpp"
#include "kernels/kernels.hpp"

namespace aces_fast {

enum MethodCode : int {
  kMethodMajority = 0,
  kMethodAcesC = 1,        // ACES-C, variant "weighted"
  kMethodAcesCFilter = 2,  // ACES-C, variant "filter"
  kMethodAcesO = 3,        // ACES-O (init "uniform", or "aces-c" when warm)
  kMethodCodet = 4,        // CodeT (any exponent, through MethodParams::power)
};

// The one list of method codes and their rerank names (_core.METHOD_CODES).
struct MethodName {
  const char* name;
  MethodCode code;
};
inline constexpr MethodName kMethodNames[] = {
    {"majority", kMethodMajority}, {"aces-c", kMethodAcesC}, {"aces-c-filter", kMethodAcesCFilter},
    {"aces-o", kMethodAcesO},      {"codet", kMethodCodet},
};

// Whether the method writes MethodOutput::weights (CodeT has no test weights;
// the bindings then allocate none).
inline bool has_test_weights(MethodCode code) { return code != kMethodCodet; }

// True when code is one of kMethodNames' codes.
inline bool is_method_code(int code) {
  for (const MethodName& m : kMethodNames)
    if (m.code == code) return true;
  return false;
}

// Every parameter of a method call. No defaults here: they are defined once, in
// the Python package, which passes every field.
struct MethodParams {
  MethodCode method;
  double tie_tol;  // >= 0; scores within tie_tol * sum(w) are snapped to one value
  double gamma;    // ACES-O, > 0
  double lr;       // ACES-O, >= 0
  int64_t steps;   // ACES-O, >= 0 (the objective output holds steps + 1 values)
  int64_t top_k;   // ACES-O; <= 0 keeps every row
  bool warm;       // ACES-O init="aces-c"
  int dedup;       // 1 on, 0 off, -1 auto (ACES-O on, ACES-C dedup_pays_for_aces_c, majority off)
  // CodeT: power[k] = k ** exponent for k < power_len (> every task's n), as
  // NumPy's `**` rounds it (the caller's table: NumPy's pow need not round as
  // the C library's does); nullptr for the other methods
  const double* power;
  int64_t power_len;
};

// Caller-allocated outputs of one task (n candidates, m tests).
struct MethodOutput {
  double* scores = nullptr;     // (n)
  double* weights = nullptr;    // (m); CodeT leaves it unset (it has no test weights)
  int64_t* order = nullptr;     // (n)
  double* loo = nullptr;        // (m) uniform LOO-AUC; ACES-C variants only
  double* objective = nullptr;  // (steps + 1) ACES-O only
  int64_t* rows = nullptr;      // (top_k_count(n, top_k)) ACES-O only: optimized rows, ascending
  bool fallback = false;        // set: ACES-C gave every test weight 0 and used majority vote
  bool not_binary = false;      // set: B holds a byte other than 0 and 1; nothing else computed
};

// Number of rows ACES-O optimizes on: min(top_k, n), or n when top_k <= 0.
int64_t top_k_count(int64_t n, int64_t top_k);

// Scratch of snap_and_order.
struct SortScratch {
  std::vector<uint64_t> key, key2;
  std::vector<int32_t> idx, idx2, group;
  std::vector<int64_t> start;
  // Set by a batch of several tasks (methods/batch.cpp): its tasks differ, so
  // the sort's branches cannot be learnt and longer lists are ranked in lanes
  // (snap_and_order; the order is the same either way).
  bool batch = false;
};

// Rows from which a task frees each phase's scratch as soon as it is done:
// allocation is then negligible next to the work, and peak memory stays a small
// multiple of the input instead of the sum of all phases.
constexpr int64_t kReleaseRows = int64_t(1) << 16;
// Packed words (8 bytes per 64 tests and row) the dedup pass keeps for the row
// scores at most: 256 KiB, e.g. 2000 x 1000. Beyond that the scores pack each
// chunk of rows again (~5% more time) rather than hold m / 8 bytes per row.
constexpr int64_t kKeepPackedWords = int64_t(1) << 15;

// Scratch reused across tasks; grows to the largest task seen (below kReleaseRows).
struct MethodWorkspace {
  RowPlan plan;
  UniformScratch uni;
  std::vector<int64_t> colsum, ck, rs, hist, passes;
  std::vector<double> w, L, logits, wfit, stmp, tables;
  std::vector<uint8_t> active;
  std::vector<int32_t> acc32;
  std::vector<uint8_t> acc8;
  std::vector<uint64_t> mask, words, packed;
  std::vector<uint8_t> unpacked;  // a packed batch task's matrix (batch.hpp)
  SortScratch sort;
};

// Snap near-ties of s (n) in place exactly like base.snap_ties(s, tol) and write
// the stable descending order into order (n). rep (nullable, n): representative
// row of every row's class of identical rows (s[i] == s[rep[i]]); only the
// representatives are sorted. O(n) time (a radix sort of the d representatives'
// scores, then a counting sort of the rows); 24 d + 4 n bytes of scratch. n < 2^31.
void snap_and_order(double* s, int64_t n, double tol, const int64_t* rep, int64_t* order,
                    SortScratch& sc);

// Run one method on B (n >= 1 rows, m >= 0 columns, row-major bytes, nonzero =
// pass). parallel / n_threads as for the kernels (a batch driver running tasks
// in parallel passes parallel = false). Results do not depend on the number of
// threads. Throws only std::bad_alloc, and std::invalid_argument for CodeT
// without a power table of more than n entries. Returns early, outputs unfinished, once
// the calling thread's interrupt token (kernels/interrupt.hpp) is cancelled, or
// with out.not_binary set when a byte of B is neither 0 nor 1 (checked first, in
// the row-dedup pass when there is one, else in a pass of its own).
// words_ready: ws.plan.words already holds B's rows packed (n * ceil(m / 64)
// words, bit j % 64 of word j / 64; unused bits 0) and B's bytes are known to be
// 0/1 (a task from bit-packed input): no packing, no value check; B may then be
// null when runs_from_words(p, n).
void run_method(const uint8_t* B, int64_t n, int64_t m, const MethodParams& p, MethodOutput& out,
                MethodWorkspace& ws, bool parallel, int n_threads, bool words_ready = false);

// True when run_method with words_ready reads only the packed rows, never B
// (ACES-C where this process's SIMD level has the uniform LOO-AUC kernel of
// packed words): a task from bit-packed input is then not unpacked.
bool runs_from_words(const MethodParams& p, int64_t n);

// The auto rule of ACES-C's row dedup (MethodParams::dedup = -1).
bool dedup_pays_for_aces_c(int64_t n, int64_t m);

}  // namespace aces_fast
