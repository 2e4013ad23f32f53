// aces_fast compiled kernels: plain C++ on raw pointers (no Python, no pybind11).
//
// Conventions shared by every kernel
//   * B is a row-major n x m byte matrix (candidates x tests); any nonzero byte
//     counts as 1 (a pass), so numpy bool and uint8 buffers work unchanged.
//   * counts (nullable, length n): row multiplicities. A row with count c acts
//     exactly like c identical rows; count 0 removes the row. nullptr = all 1.
//     Callers must keep sum(counts) < 2^31 (integer pair counts stay exact).
//   * parallel / n_threads: OpenMP over tests (columns) when parallel is true;
//     n_threads = 0 means the OpenMP default. A batch driver that already runs
//     an OpenMP loop over tasks calls these with parallel = false. Results never
//     depend on the number of threads (bitwise).
//   * Kernels never throw from inside a parallel region; they may throw
//     std::bad_alloc before one.
//   * Long kernels poll the calling thread's interrupt token (interrupt.hpp)
//     at safe points and return early, outputs unfinished, once it is
//     cancelled; callers then discard the outputs.
#pragma once

#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace aces_fast {

// ---- threading helpers (loo_auc.cpp) -------------------------------------------
bool has_openmp();
int max_threads();
// n_threads as the bindings pass it: > 0 exactly that many (the caller's
// choice or OMP_NUM_THREADS), < 0 "chosen by the work, at most -n_threads",
// 0 the same with omp_get_max_threads() as the ceiling.
//
// Threads a kernel will use: 1 if !parallel or no OpenMP, else n_threads (> 0)
// or the ceiling. For kernels that size their team by their own measure of work
// (the surrogate's pair work).
int resolve_threads(bool parallel, int n_threads);
// Threads for `work` cells (n * m, summed over a batch's tasks, times the Adam
// steps for ACES-O): 1 below kMinParallelCells whatever n_threads says (small
// work is never slower than on one thread); n_threads if > 0; else one thread
// per kCellsPerThread cells, at least 2 and at most the ceiling.
int threads_for_work(int64_t work, int n_threads);
// Index of the calling thread in the innermost OpenMP team (0 outside one, or
// without OpenMP): selects a thread's slice of per-thread scratch.
int thread_index();

// Problems with fewer cells (n * m) than this stay on one thread: a parallel
// region costs microseconds (far more on a busy machine), as much as the ~100 us
// of work it would split.
constexpr int64_t kMinParallelCells = int64_t(1) << 18;
// Cells per thread when the work chooses the team: at kMinParallelCells two
// threads (the team today's 2-core default gave), a 16-thread team from 2 Mi
// cells (about 0.3-1 ms of single-thread ACES-C / LOO-AUC work), so the
// fork/join of a team (microseconds per thread) stays a small share.
constexpr int64_t kCellsPerThread = kMinParallelCells / 2;

// body(i, tid) for i in [0, n): an OpenMP loop on nt > 1 threads (tid: the
// thread's index in that team, for per-thread scratch), else a plain loop with
// tid 0. Threads take `chunk` consecutive indices at a time (dynamic schedule;
// 1 for uneven work per index), or with chunk = 0 one contiguous share each.
// Not `#pragma omp parallel for if (nt > 1)`: libgomp sets up a team even for a
// false if-clause (~0.35 us per region, a tenth of a small rerank call), and
// inside a batch's loop over tasks omp_get_thread_num() outside a region is the
// task team's index, not a slice of this call's scratch.
template <typename Body>
inline void for_each_index(int nt, int64_t n, Body&& body, int64_t chunk = 0) {
#ifdef _OPENMP
  if (nt > 1) {
    const int64_t c = chunk > 0 ? chunk : (n + nt - 1) / nt;
#pragma omp parallel for num_threads(nt) schedule(dynamic, c)
    for (int64_t i = 0; i < n; ++i) body(i, omp_get_thread_num());
    return;
  }
#else
  (void)nt;
  (void)chunk;
#endif
  for (int64_t i = 0; i < n; ++i) body(i, 0);
}

// ---- LOO-AUC (loo_auc.cpp) -----------------------------------------------------
// out[j] = AUC(S^(-j), B[:, j]) with S^(-j)_i = s_i - w_j B[i,j], s = B w:
// over pairs (p passing j, f failing j), weighted by counts[p]*counts[f],
// P(S_p > S_f) + 1/2 P(tie). NaN when no row with count > 0 passes j or none fails.
//
// Uniform weights (w = 1): exact integer arithmetic.
void loo_auc_uniform(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts, double* out,
                     bool parallel = true, int n_threads = 0);

// Reusable scratch of the uniform kernel (grows to the largest problem seen).
struct UniformScratch {
  std::vector<int64_t> rs, hist, htot, row_of, lstart, lval, ltot;
  std::vector<uint64_t> buf;
  std::vector<uint32_t> ibuf;
  std::vector<int32_t> pcur;
  std::vector<double> dbuf;
  std::vector<uint32_t> la;   // per level: a_k of the register kernel
  std::vector<uint8_t> ladj;  // per level: level k - 1 has score one less
  void release() { *this = UniformScratch(); }
};

// loo_auc_uniform with caller-owned scratch and two extras:
//   rowsums (nullable, length n): precomputed passes per row (e.g. from
//     dedup_rows), saving a pass over B; entries of rows with count 0 are ignored;
//   colsum (nullable, length m): receives sum_i counts[i] [B_ij != 0], the
//     count-weighted column sums, at no extra cost;
//   words (nullable, n * ceil(m / 64)): the rows packed (bit j % 64 of word
//     j / 64 = column j, bits past m 0), read instead of B by the kernel
//     uniform_block_words_kernel(ntot) returns when it returns one (ntot: the
//     total multiplicity, n without counts). B may be null exactly then
//     (loo_auc_reads_words).
//   by_sum (nullable, length n, with rowsums): every row's index in ascending
//     order of rowsums, equal sums in ascending index (RowPlan::order of
//     dedup_rows's grouped route), spares the kernel its own counting sort.
// Extra memory O(n + m); B is read in place.
void loo_auc_uniform_ex(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts,
                        const int64_t* rowsums, double* out, int64_t* colsum, bool parallel,
                        int n_threads, UniformScratch& ws, const uint64_t* words = nullptr,
                        const int32_t* by_sum = nullptr);

// True when loo_auc_uniform_ex of total multiplicity ntot reads the packed
// words it is given instead of B (this process's SIMD level has the kernel).
bool loo_auc_reads_words(int64_t ntot);

// Float weights w (length m, finite, >= 0); w == nullptr dispatches to
// loo_auc_uniform (tie_tol is then irrelevant: integer scores are exact).
// s_i = sum_j w_j [B_ij != 0] summed in ascending j (float64). With
// T = tie_tol * sum_k w_k and x = s_p - w_j (float64) for a passer p, a failer f
// is a win iff s_f < x - T and a tie iff x - T <= s_f <= x + T (each of x, x - T,
// x + T rounded to float64 once). One stable sort of s, then per column an O(n)
// two-pointer merge; O(n log n + n m) overall. Extra memory ~40 bytes per kept
// row plus 20 bytes per kept row and thread (no copy of B).
void loo_auc(const uint8_t* B, int64_t n, int64_t m, const double* w, const int64_t* counts,
             double tie_tol, double* out, bool parallel = true, int n_threads = 0);

// Row scores: s[k] = sum over q < ncols of w[j] [B[r_k, j] != 0] with
// j = cols ? cols[q] : q and r_k = rows ? rows[k] : k, each summed sequentially
// in ascending q (float64, starting from +0.0). Leaving out columns of weight 0
// changes no sum. O(nrows ncols); n_threads > 1 splits the rows.
void row_scores(const uint8_t* B, int64_t m, const double* w, const int64_t* cols, int64_t ncols,
                const int64_t* rows, int64_t nrows, double* s, int n_threads);

// ---- logistic surrogate of LOO-AUC (surrogate.cpp) -----------------------------
// Precomputed structure of one (B, counts) problem restricted to a subset of
// columns; evaluate() may be called repeatedly without allocating.
//
// Two kernels with equal results up to rounding (~1e-15): per column (pairs of
// a passer and a failer; many distinct rows) and by row pairs (one contiguous
// sweep over all columns per pair of rows; few distinct rows, as ACES-O's
// top_k on repeated rows). The constructor picks one from the problem shape
// alone (never from the threads or the SIMD level; cost model in
// surrogate.cpp), so results stay bitwise independent of n_threads and of
// batching. With at most 32 kept rows the per-column kernel runs with the rows
// in registers where the CPU has AVX-512 (simd/small_columns.cpp), bit for bit
// the generic one. For tests only, the environment variable
// ACES_FAST_SURROGATE_KERNEL=rows|columns (read by each constructor) forces
// the choice; the row-pair kernel still falls back to the per-column one in an
// evaluation where some exp(-z) could overflow.
class SurrogateWorkspace {
 public:
  // cols: indices of the columns to use (nullptr = all m, in order); n_cols its length.
  SurrogateWorkspace(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts,
                     const int64_t* cols, int64_t n_cols, bool parallel, int n_threads);

  // w: weights of the selected columns (length n_cols, finite, >= 0); gamma > 0.
  // Writes L (length n_cols; NaN for a column with empty P_j or F_j) and, if
  // grad != nullptr, grad = dJ/dw (length n_cols). Returns
  // J = sum over columns with nonempty P_j, F_j of w_j (L_j - 1/2).
  double evaluate(const double* w, double gamma, double* L, double* grad);

  int64_t n_rows() const { return ne_; }
  int64_t n_cols() const { return mc_; }
  // True when evaluate() runs the row-pair kernel (while no exp can overflow).
  bool row_pairs() const { return rows_; }

 private:
  void column(int64_t q, const double* w, double gamma, bool fast, bool want_v, double* vb,
              double* L, int tid);
  void columns(const double* w, double gamma, bool fast, double* L, double* grad);
  void row_pair_eval(const double* w, double gamma, double* L, double* grad);

  int64_t ne_ = 0;  // rows with count > 0
  int64_t mc_ = 0;  // selected columns
  int nt_ = 1;
  bool parallel_ = false;
  bool poll_ = false;  // evaluate() polls the interrupt token inside its loops
  int64_t nchunk_ = 0;
  std::vector<double> cnt_;       // (ne) multiplicity of each kept row
  std::vector<int32_t> idx_;      // (mc * ne) per column: passer rows, then failer rows (ascending)
  std::vector<int64_t> npass_;    // (mc) number of distinct passer rows
  std::vector<double> pw_, fw_;   // (mc) count-weighted |P_j|, |F_j|
  int64_t ngr_ = 0, ngc_ = 0;     // groups of eight kept rows / of eight columns
  std::vector<uint8_t> rbytes_;   // (ngr * mc) pass bits of 8 rows per column (masked_sums)
  std::vector<uint8_t> cbytes_;   // (ngc * ne) pass bits of 8 columns per row (masked_sums)
  std::vector<double> cv_, bvc_;  // (ne) c_i v_i; (8 ngc) B^T (c v)
  std::vector<double> s_, E_, F_;  // (8 ngr, ne, ne) scores, exp(-g(s-s0)), exp(g(s-s0))
  std::vector<double> v_;          // (ne)
  std::vector<double> G_, D_, c_;  // (mc) exp(g w_j), D_j, c_j
  std::vector<double> vbuf_;       // (nchunk * ne) per-chunk partial v
  std::vector<double> scratch_;    // (nt * 6 * ne) per-thread gather buffers
  // Row-pair kernel (few distinct rows), columns zero-padded to mp_ (multiple of 8):
  bool rows_ = false;
  int64_t mp_ = 0;
  int64_t nrb_ = 0;         // column blocks of kRowPairBlock
  std::vector<double> xb_;  // ((ne + 1) * mp) kept rows of B as 0.0 / 1.0, a zero row
  std::vector<double> jt_;  // (mc) L_j - 1/2 where column j has pairs, else 0
  std::vector<double> pf_;  // (mp) |P_j| |F_j| with multiplicities; 0 = constant
  std::vector<double> Gp_, cw_, Ls_, Ds_, bv_;  // (mp) exp(g w_j), c_j, sums, B^T (c v)
  std::vector<double> rvbuf_;                   // (nrb * ne) per-block partial v
  // Per-column kernel in registers (2..32 kept rows):
  std::vector<uint32_t> sbits_;  // (mc) bit r: kept row r passes; empty otherwise
  std::vector<uint8_t> slists_;  // (mc * 80) per column: inner, outer rows, positions
  std::vector<double> spf_;      // (mc) |P_j| |F_j| with multiplicities
  bool sunit_ = false;           // every kept row has count 1
  alignas(64) double sE_[32], sF_[32], sC_[32];
};

// One-shot surrogate over all m columns. L (m), grad (m, nullable). Returns J.
double surrogate_loo_auc(const uint8_t* B, int64_t n, int64_t m, const double* w, double gamma,
                         const int64_t* counts, double* L, double* grad, bool parallel = true,
                         int n_threads = 0);

// ---- ACES-O optimisation (aces_o.cpp) ------------------------------------------
// w = softmax(logits) over columns with active[j] != 0 (others get weight 0 and
// their logits never change); `steps` Adam steps (PyTorch semantics, beta =
// (0.9, 0.999), eps = 1e-8) on the loss -J(w) w.r.t. the active logits.
// weights_out (m): final softmax weights. objective_out (steps + 1): J(w_t),
// t = 0..steps. No active column: weights and objective all 0.
void aces_o_fit(const uint8_t* B, int64_t n, int64_t m, const double* logits0,
                const uint8_t* active, double gamma, double lr, int64_t steps,
                const int64_t* counts, double* weights_out, double* objective_out,
                bool parallel = true, int n_threads = 0);

}  // namespace aces_fast
