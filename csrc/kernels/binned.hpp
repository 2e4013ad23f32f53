// Binned (grid) approximation of the ACES-O surrogate: an opt-in replacement for
// surrogate.cpp / aces_o.cpp when sum_j |P_j||F_j| pairs per step is too many
// (e.g. top_k=None with n = 20 000 candidates).
//
// What is approximated
//   The exact kernel sums, for every column j, K over all pass/fail pairs, with
//   the leave-one-out scores S_p = s_p - w_j (p in P_j), S_f = s_f (f in F_j):
//     L_j = mean_pf sigma(gamma (S_p - S_f)),   D_j = sum_pf c_p c_f sigma'(gamma (S_p - S_f)),
//     u^j_p = sum_f c_f sigma'(...),  u^j_f = -sum_p c_p sigma'(...).
//   Here every position is first spread onto a uniform grid of G = `bins` points
//     x_k = lo + k h,  lo = max(0, min_i s_i - max_j w_j),  h = (max_i s_i - lo) / (G - 1)
//   (every S lies in [lo, max s]) by linear interpolation (cloud-in-cell): a point
//   at lo + (a + alpha) h puts (1 - alpha) c on node a and alpha c on node a + 1.
//   Then, per column, with passer histogram hp and failer histogram hf:
//     L_j |P_j||F_j| = sum_k hp[k] sum_l hf[l] sigma(gamma (k - l) h),
//     D_j           = sum_k hp[k] A[k],  A[k] = sum_l hf[l] sigma'(gamma (k - l) h),
//     u^j_p = A interpolated at p's position, u^j_f = -(hp * sigma') interpolated at f's.
//   Passers are placed at s_p - w_j (not s_p) so one kernel sigma(gamma x) serves
//   every column and its spectrum is computed once per step. The gradient is
//   then assembled exactly as in surrogate.cpp:
//     dJ/dw_k = (L_k - 1/2) - gamma c_k D_k + gamma sum_i c_i B_ik v_i,  v_i = sum_j c_j u^j_i.
//
// Error bound (binned_error_bound)
//   For one pair, the binned value is E[K(X)] where X = (grid node of p) - (grid
//   node of f) takes at most three values, E[X] = S_p - S_f exactly and
//   Var X = h^2 (alpha(1-alpha) + beta(1-beta)) <= h^2 / 2. Taylor's theorem gives
//   |E K(X) - K(E X)| <= (1/2) sup|K''| Var X <= (h^2 / 4) sup|K''|. With
//   K(x) = sigma(gamma x): sup|K''| = gamma^2 M2, M2 = max|sigma''| = 1/(6 sqrt 3);
//   for K = sigma'(gamma x): gamma^2 M3, M3 = max|sigma'''| = 1/8. Averages of pairs
//   inherit the per-pair bound, so with W = sum of the weights of columns having
//   both passers and failers:
//     |L_j^bin - L_j|    <= eps_L = gamma^2 h^2 / (24 sqrt 3) + 1e-10
//     |J^bin - J|        <= W eps_L
//     |grad_k^bin - grad_k| <= gamma^2 h^2 / (24 sqrt 3) + 3 gamma^3 h^2 W / 32 + 1e-10 (1 + 3
//     gamma W)
//   (gradient: (L_k - 1/2) contributes eps_L; gamma c_k D_k is gamma w_k times a mean
//   of sigma' pairs, error <= gamma w_k gamma^2 h^2 / 32; gamma (B^T v)_k collects, per
//   column j, c_j times at most 2 |P_j||F_j| pair errors gamma^2 h^2 / 32, i.e.
//   <= gamma^3 h^2 W / 16; w_k <= W.) The 1e-10 terms allow for floating-point
//   rounding: the FFT's error is ~ 15 u log2(N) sqrt(N) <= 3e-11 relative to
//   |P||F| for N <= 2^17 (bins <= 2^16, the allowed maximum), u = 2^-53.
//   Second order: halving h divides the discretisation error by ~4.
//   At gamma = 10 and normalised weights (W <= 1, h <= 1/(G-1)), G = 2048:
//   eps_L ~ 5.7e-7, grad error <= 2.3e-5 (measured errors are 5-100x smaller).
//
// Cost per evaluation: O(n_u m) for scores, deposits, read-back and B^T v (n_u =
// distinct rows with count > 0: identical rows are merged into one row with the
// summed count when the workspace is built) plus, per column, either two complex
// FFTs of size N = next_pow2(2G - 1) (O(N log N)) or, when the two histograms have
// few occupied nodes (nnz_p nnz_f small, e.g. many duplicate rows), direct sums
// over occupied node pairs O(nnz_p nnz_f); the choice depends only on the data.
// Powers of two are the efficient bins (bins = 2049 would double N). Measured on
// 2 shared cores: n = 20 000, m = 1 000, 90 steps ~ 12-14 s CPU at bins = 2048
// (exact: ~12 000 s); below n ~ 400 the exact kernel is cheaper.
// Memory: B is stored as m column bitsets (n_u m / 8 bytes), O(n_u) shared vectors,
// O(N) per thread, plus min(m, 16) partial v vectors of n_u doubles (a fixed number
// of column chunks summed in chunk order: results do not depend on the number of
// threads, bitwise). No n x m float matrix is formed.
#pragma once

#include <cstdint>
#include <vector>

namespace aces_fast {

// Largest supported grid (the floating-point allowance above assumes it).
constexpr int64_t kMaxBins = int64_t(1) << 16;

// Which kernel-sum path a column takes: chosen per column by cost, or forced (tests).
enum class BinnedPath { kAuto = 0, kFft = 1, kDirect = 2 };

struct BinnedBound {
  double L;     // bound on |L_j^bin - L_j| for every column
  double J;     // bound on |J^bin - J|
  double grad;  // bound on |grad_k^bin - grad_k| for every column
};

// The bounds stated above; h = grid spacing, weight_sum = W (>= 0).
BinnedBound binned_error_bound(double gamma, double h, double weight_sum);

// Radix-2 complex FFT on split real/imaginary arrays (binned_fft.cpp).
class Fft {
 public:
  explicit Fft(int64_t n);  // n: power of two >= 2
  // In place: X[f] = sum_k x[k] exp(-2 pi i k f / n).
  void forward(double* re, double* im) const;
  // In place: x[k] = sum_f X[f] exp(+2 pi i k f / n) (no 1/n factor).
  void inverse_unscaled(double* re, double* im) const { forward(im, re); }
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  std::vector<uint32_t> rev_;
  std::vector<double> twr_, twi_;  // half-size h twiddles exp(-i pi j / h) at offset h - 1
};

// Precomputed structure of one (B, counts) problem restricted to a subset of
// columns; evaluate() may be called repeatedly without allocating.
class BinnedSurrogate {
 public:
  // cols: indices of the columns to use (nullptr = all m); bins >= 2, <= kMaxBins.
  BinnedSurrogate(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts,
                  const int64_t* cols, int64_t n_cols, int64_t bins, bool parallel, int n_threads,
                  BinnedPath path = BinnedPath::kAuto);

  // Same contract as SurrogateWorkspace::evaluate (kernels.hpp), binned sums.
  double evaluate(const double* w, double gamma, double* L, double* grad);

  int64_t n_rows() const { return nu_; }               // distinct rows with count > 0
  double last_h() const { return h_; }                 // grid spacing of the last evaluate
  int64_t fft_columns() const { return n_fft_cols_; }  // columns summed by FFT last time

 private:
  struct Scratch {                       // per-thread buffers, O(N)
    std::vector<double> hist, R;         // (2G) [hf | hp], [B | A] node values
    std::vector<double> zr, zi, wr, wi;  // (N) FFT buffers
    std::vector<int32_t> nzp, nzf;       // (G) occupied nodes of hp, hf
    std::vector<double> vzp, vzf;        // (G) their masses
  };
  // Returns true when the column's sums went through the FFT.
  bool column(int64_t q, double wq, bool want_v, double* vb, double* L, Scratch& sc);

  int64_t nu_ = 0, mc_ = 0, nw_ = 0, G_ = 0, N_ = 0;
  int nt_ = 1;
  bool parallel_ = false;       // columns in parallel
  bool parallel_rows_ = false;  // row passes (scores, v, B^T v) in parallel
  BinnedPath path_ = BinnedPath::kAuto;
  int64_t nchunk_ = 0;
  Fft fft_;
  std::vector<uint64_t> bits_;          // (mc * nw) column bitsets over distinct rows
  std::vector<double> cnt_;             // (nu) multiplicity of each distinct row
  std::vector<double> pw_, fw_;         // (mc) count-weighted |P_j|, |F_j|
  std::vector<double> s_, tf_;          // (nu) scores, grid coordinate (s - lo) / h
  std::vector<double> cv_;              // (nu) counts * v
  std::vector<double> D_, c_;           // (mc)
  std::vector<double> kS_, kD_;         // (2G - 1) sigma, sigma' at d h, d = -(G-1)..G-1
  std::vector<double> KSr_, KSi_, KD_;  // (N) kernel spectra / N
  std::vector<double> vbuf_;            // (nchunk * nu)
  std::vector<Scratch> scratch_;        // one per thread
  double h_ = 0.0, inv_h_ = 0.0;
  int64_t n_fft_cols_ = 0;
};

// One-shot binned surrogate over all m columns: L (m), grad (m, nullable); returns J.
double surrogate_loo_auc_binned(const uint8_t* B, int64_t n, int64_t m, const double* w,
                                double gamma, const int64_t* counts, int64_t bins, double* L,
                                double* grad, bool parallel = true, int n_threads = 0,
                                BinnedPath path = BinnedPath::kAuto);

// ACES-O with the binned surrogate; same contract as aces_o_fit (kernels.hpp).
void aces_o_fit_binned(const uint8_t* B, int64_t n, int64_t m, const double* logits0,
                       const uint8_t* active, double gamma, double lr, int64_t steps,
                       const int64_t* counts, int64_t bins, double* weights_out,
                       double* objective_out, bool parallel = true, int n_threads = 0,
                       BinnedPath path = BinnedPath::kAuto);

}  // namespace aces_fast
