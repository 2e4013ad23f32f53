// Binned surrogate LOO-AUC, its gradient and ACES-O on it. The maths, the grid
// and the error bound are stated in binned.hpp; this file holds the numerics.
#include "kernels/binned.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "kernels/adam.hpp"
#include "kernels/bits.hpp"
#include "kernels/interrupt.hpp"
#include "kernels/kernels.hpp"
#include "kernels/sigmoid.hpp"
#include "portable.hpp"

namespace aces_fast {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kMaxChunks = 16;
// One FFT column costs about this many direct node-pair visits per N log2 N
// (measured: two size-N transforms plus O(N) passes vs. 3 gathered multiply-adds
// per pair).
constexpr double kFftPairsPerNLogN = 1.0;

int64_t fft_size(int64_t bins) {
  int64_t n = 2;
  while (n < 2 * bins - 1) n *= 2;
  return n;
}

// Grid cell of a row's leave-one-out score t (in grid units: tfu, minus shift for
// a passer, bit = 1; t >= 0): left node a = min(floor(t), amax) and the offset
// al = t - a towards node a + 1. Shared by the deposit and the gather so both
// use the same cells.
inline void grid_cell(double tfu, int64_t bit, double shift, int32_t amax, int32_t* a, double* al) {
  const double t = std::max(0.0, tfu - static_cast<double>(bit) * shift);
  *a = std::min(static_cast<int32_t>(t), amax);
  *al = t - static_cast<double>(*a);
}

// Index of the lowest set bit of x != 0.
inline int64_t lowest_bit(uint64_t x) { return portable::ctz64(x); }

}  // namespace

BinnedBound binned_error_bound(double gamma, double h, double weight_sum) {
  const double g2h2 = gamma * gamma * h * h;
  const double disc_L = g2h2 / (24.0 * std::sqrt(3.0));
  const double fp = 1e-10;
  BinnedBound b;
  b.L = disc_L + fp;
  b.J = weight_sum * b.L;
  b.grad = disc_L + 3.0 * gamma * g2h2 * weight_sum / 32.0 + fp * (1.0 + 3.0 * gamma * weight_sum);
  return b;
}

BinnedSurrogate::BinnedSurrogate(const uint8_t* B, int64_t n, int64_t m, const int64_t* counts,
                                 const int64_t* cols, int64_t n_cols, int64_t bins, bool parallel,
                                 int n_threads, BinnedPath path)
    : G_(bins), N_(fft_size(bins)), path_(path), fft_(fft_size(bins)) {
  nt_ = resolve_threads(parallel, n_threads);
  mc_ = cols ? std::max<int64_t>(n_cols, 0) : m;
  const size_t mc = static_cast<size_t>(mc_);
  const size_t nwr = (mc + 63) / 64;  // words of one packed row

  // Merge identical rows (over the selected columns): a row with count c acts as
  // c copies, so merged rows keep the summed count. First-occurrence order.
  std::vector<uint64_t> keys;  // (nu * nwr) packed distinct rows
  std::vector<uint64_t> tmp(nwr);
  std::unordered_map<uint64_t, int32_t> head;
  std::vector<int32_t> next_same;
  for (int64_t i = 0; i < n; ++i) {
    if (counts && counts[i] <= 0) continue;
    const double c = counts ? static_cast<double>(counts[i]) : 1.0;
    const uint8_t* row = B + i * m;
    std::fill(tmp.begin(), tmp.end(), 0);
    for (size_t q = 0; q < mc; ++q) {
      const int64_t j = cols ? cols[q] : static_cast<int64_t>(q);
      tmp[q >> 6] |= static_cast<uint64_t>(row[j] != 0) << (q & 63);
    }
    uint64_t hv = 0x9e3779b97f4a7c15ULL;
    for (uint64_t x : tmp) hv = bits::mix64(hv ^ x);
    auto it = head.find(hv);
    int32_t u = it == head.end() ? -1 : it->second;
    for (; u >= 0; u = next_same[u])
      if (std::equal(tmp.begin(), tmp.end(), keys.begin() + static_cast<size_t>(u) * nwr)) break;
    if (u >= 0) {
      cnt_[u] += c;
    } else {
      const int32_t nu = static_cast<int32_t>(cnt_.size());
      keys.insert(keys.end(), tmp.begin(), tmp.end());
      cnt_.push_back(c);
      next_same.push_back(it == head.end() ? -1 : it->second);
      head[hv] = nu;
    }
  }
  nu_ = static_cast<int64_t>(cnt_.size());
  const size_t nu = static_cast<size_t>(nu_);
  nw_ = (nu_ + 63) / 64;
  const size_t nw = static_cast<size_t>(nw_);

  bits_.assign(mc * nw, 0);
  pw_.assign(mc, 0.0);
  fw_.assign(mc, 0.0);
  double total = 0.0;
  for (size_t u = 0; u < nu; ++u) {
    total += cnt_[u];
    const uint64_t* key = keys.data() + u * nwr;
    for (size_t k = 0; k < nwr; ++k) {
      uint64_t x = key[k];
      while (x) {
        const size_t q = k * 64 + static_cast<size_t>(lowest_bit(x));
        x &= x - 1;
        bits_[q * nw + (u >> 6)] |= uint64_t(1) << (u & 63);
        pw_[q] += cnt_[u];
      }
    }
  }
  for (size_t q = 0; q < mc; ++q) fw_[q] = total - pw_[q];  // integer-valued: exact

  // Threads only pay off for enough work per evaluation (each parallel region
  // costs a fork/join, far more on an oversubscribed machine). Per column: ~4 n_u
  // row operations plus at most min(N log2 N, n_u^2) node-pair operations.
  const double dnu = static_cast<double>(nu_), dmc = static_cast<double>(mc_);
  const double nlogn = static_cast<double>(N_) * std::log2(static_cast<double>(N_));
  parallel_ = nt_ > 1 && dmc * (4.0 * dnu + std::min(nlogn, dnu * dnu)) >= 5e6;
  parallel_rows_ = parallel_ && dmc * dnu >= 4e6;  // the O(n_u m) passes outside columns
  nchunk_ = std::min<int64_t>(mc_, kMaxChunks);

  s_.assign(nu, 0.0);
  tf_.assign(nu, 0.0);
  cv_.assign(nu, 0.0);
  D_.assign(mc, 0.0);
  c_.assign(mc, 0.0);
  const size_t G = static_cast<size_t>(G_), N = static_cast<size_t>(N_);
  kS_.assign(2 * G - 1, 0.0);
  kD_.assign(2 * G - 1, 0.0);
  KSr_.assign(N, 0.0);
  KSi_.assign(N, 0.0);
  KD_.assign(N, 0.0);
  vbuf_.assign(static_cast<size_t>(nchunk_) * nu, 0.0);
  scratch_.resize(static_cast<size_t>(nt_));
  for (Scratch& sc : scratch_) {
    sc.hist.assign(2 * G, 0.0);
    sc.R.assign(2 * G, 0.0);
    sc.zr.assign(N, 0.0);
    sc.zi.assign(N, 0.0);
    sc.wr.assign(N, 0.0);
    sc.wi.assign(N, 0.0);
    sc.nzp.assign(G, 0);
    sc.nzf.assign(G, 0);
    sc.vzp.assign(G, 0.0);
    sc.vzf.assign(G, 0.0);
  }
}

bool BinnedSurrogate::column(int64_t q, double wq, bool want_v, double* vb, double* L,
                             Scratch& sc) {
  const double P = pw_[q], F = fw_[q];
  if (P == 0.0 || F == 0.0) {
    L[q] = kNaN;
    D_[q] = 0.0;
    c_[q] = 0.0;
    return false;
  }
  const int64_t G = G_, nu = nu_;
  double* hist = sc.hist.data();  // [0, G): failers, [G, 2G): passers
  std::fill(hist, hist + 2 * G, 0.0);
  const uint64_t* bw = bits_.data() + q * nw_;
  const double* tf = tf_.data();
  const double* cnt = cnt_.data();
  const double shift = wq * inv_h_;  // passers sit at s_p - w_j
  const int32_t amax = static_cast<int32_t>(G - 2);

  // Cloud-in-cell deposit of both classes.
  for (int64_t k = 0; k < nw_; ++k) {
    const uint64_t x = bw[k];
    const int64_t u0 = k * 64, ub = std::min<int64_t>(64, nu - u0);
    for (int64_t b = 0; b < ub; ++b) {
      const int64_t u = u0 + b;
      const int64_t bit = static_cast<int64_t>((x >> b) & 1);
      int32_t a;
      double al;
      grid_cell(tf[u], bit, shift, amax, &a, &al);
      double* H = hist + bit * G;
      const double c = cnt[u];
      H[a] += c - c * al;
      H[a + 1] += c * al;
    }
  }
  const double* hf = hist;
  const double* hp = hist + G;

  int64_t np = 0, nf = 0;
  for (int64_t k = 0; k < G; ++k) {
    if (hp[k] != 0.0) {
      sc.nzp[np] = static_cast<int32_t>(k);
      sc.vzp[np++] = hp[k];
    }
    if (hf[k] != 0.0) {
      sc.nzf[nf] = static_cast<int32_t>(k);
      sc.vzf[nf++] = hf[k];
    }
  }
  bool direct;
  if (path_ == BinnedPath::kAuto)
    direct = static_cast<double>(np) * static_cast<double>(nf) <
             kFftPairsPerNLogN * static_cast<double>(N_) * std::log2(static_cast<double>(N_));
  else
    direct = path_ == BinnedPath::kDirect;

  double* R = sc.R.data();  // [0, G): failer read-back (hp * sigma'), [G, 2G): passer (hf * sigma')
  double* Bq = R;
  double* A = R + G;
  double Lnum = 0.0, D = 0.0;
  if (direct) {
    std::fill(R, R + 2 * G, 0.0);
    const double* kS = kS_.data() + (G - 1);  // kS[d], d in (-G, G)
    const double* kD = kD_.data() + (G - 1);
    const int32_t* ip = sc.nzp.data();
    const int32_t* iF = sc.nzf.data();
    const double* vp = sc.vzp.data();
    const double* vf = sc.vzf.data();
    for (int64_t a = 0; a < np; ++a) {
      const int32_t k = ip[a];
      double s1 = 0.0, s2 = 0.0;
      for (int64_t b = 0; b < nf; ++b) {
        const int32_t d = k - iF[b];
        s1 += vf[b] * kS[d];
        s2 += vf[b] * kD[d];
      }
      A[k] = s2;
      Lnum += vp[a] * s1;
      D += vp[a] * s2;
    }
    if (want_v) {
      for (int64_t b = 0; b < nf; ++b) {
        const int32_t l = iF[b];
        double s2 = 0.0;
        for (int64_t a = 0; a < np; ++a) s2 += vp[a] * kD[ip[a] - l];
        Bq[l] = s2;
      }
    }
  } else {
    const int64_t N = N_;
    double* zr = sc.zr.data();
    double* zi = sc.zi.data();
    double* wr = sc.wr.data();
    double* wi = sc.wi.data();
    std::memcpy(zr, hp, static_cast<size_t>(G) * sizeof(double));
    std::memcpy(zi, hf, static_cast<size_t>(G) * sizeof(double));
    std::fill(zr + G, zr + N, 0.0);
    std::fill(zi + G, zi + N, 0.0);
    fft_.forward(zr, zi);  // Z = FFT(hp) + i FFT(hf)
    const double* KSr = KSr_.data();
    const double* KSi = KSi_.data();
    const double* KD = KD_.data();
    for (int64_t f = 0; f < N; ++f) {
      const int64_t g = (N - f) & (N - 1);
      const double a = zr[f], b = zi[f], c = zr[g], d = zi[g];
      // Hp = FFT(hp)[f], Hf = FFT(hf)[f] from Z[f] and conj(Z[-f]).
      const double hpr = 0.5 * (a + c), hpi = 0.5 * (b - d);
      const double hfr = 0.5 * (b + d), hfi = -0.5 * (a - c);
      const double pr = hpr * hfr + hpi * hfi;  // conj(Hp) Hf
      const double pi = hpr * hfi - hpi * hfr;
      Lnum += pr * KSr[f] - pi * KSi[f];  // Parseval: sum_k hp[k] (hf * kS)[k]
      // FFT(hf) + i FFT(hp) = i conj(Z[-f]) = (d, c); times the real, even sigma' spectrum.
      wr[f] = KD[f] * d;
      wi[f] = KD[f] * c;
    }
    if (want_v) {                     // D and the read-back values only serve the gradient
      fft_.inverse_unscaled(wr, wi);  // = (hf * sigma') + i (hp * sigma'); 1/N is in KD
      std::memcpy(A, wr, static_cast<size_t>(G) * sizeof(double));
      std::memcpy(Bq, wi, static_cast<size_t>(G) * sizeof(double));
      for (int64_t k = 0; k < G; ++k) D += hp[k] * A[k];
    }
  }

  const double pf = P * F;
  L[q] = Lnum / pf;
  D_[q] = D;
  const double cq = wq / pf;
  c_[q] = cq;
  if (want_v) {
    // passers get +c_j A(p), failers -c_j (hp * sigma')(f), both interpolated;
    // the sign and c_j go into the node values so the row loop has no branch
    for (int64_t k = 0; k < G; ++k) {
      Bq[k] *= -cq;
      A[k] *= cq;
    }
    for (int64_t k = 0; k < nw_; ++k) {
      const uint64_t x = bw[k];
      const int64_t u0 = k * 64, ub = std::min<int64_t>(64, nu - u0);
      for (int64_t b = 0; b < ub; ++b) {
        const int64_t u = u0 + b;
        const int64_t bit = static_cast<int64_t>((x >> b) & 1);
        int32_t a;
        double al;
        grid_cell(tf[u], bit, shift, amax, &a, &al);
        const double* Rb = R + bit * G;
        vb[u] += Rb[a] + al * (Rb[a + 1] - Rb[a]);
      }
    }
  }
  return !direct;
}

double BinnedSurrogate::evaluate(const double* w, double gamma, double* L, double* grad) {
  const int64_t nu = nu_, mc = mc_, G = G_, N = N_, nw = nw_;
  n_fft_cols_ = 0;
  if (mc == 0) return 0.0;
  if (nu == 0) {
    for (int64_t q = 0; q < mc; ++q) {
      L[q] = kNaN;
      if (grad) grad[q] = 0.0;
    }
    h_ = 0.0;
    return 0.0;
  }
  // Scores s = B w over distinct rows, each summed in ascending column order;
  // threads take blocks of 1024 rows (the sums do not depend on the split).
  double wmax = 0.0;
  for (int64_t q = 0; q < mc; ++q) wmax = std::max(wmax, w[q]);
  {
    constexpr int64_t kWordsPerBlock = 16;
    const int64_t nblk = (nw + kWordsPerBlock - 1) / kWordsPerBlock;
    double* s = s_.data();
    const uint64_t* bits = bits_.data();
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt_) if (parallel_rows_) schedule(static)
#endif
    for (int64_t bk = 0; bk < nblk; ++bk) {
      const int64_t k0 = bk * kWordsPerBlock, k1 = std::min(nw, k0 + kWordsPerBlock);
      std::fill(s + k0 * 64, s + std::min(nu, k1 * 64), 0.0);
      for (int64_t q = 0; q < mc; ++q) {
        const double wq = w[q];
        const uint64_t* bw = bits + q * nw;
        for (int64_t k = k0; k < k1; ++k) {
          uint64_t x = bw[k];
          while (x) {
            s[k * 64 + lowest_bit(x)] += wq;
            x &= x - 1;
          }
        }
      }
    }
  }
  double smin = s_[0], smax = s_[0];
  for (int64_t u = 1; u < nu; ++u) {
    smin = std::min(smin, s_[u]);
    smax = std::max(smax, s_[u]);
  }
  // Every leave-one-out score lies in [lo, smax]: S_p = s_p - w_j >= max(0, smin - wmax).
  const double lo = std::max(0.0, smin - wmax);
  h_ = (smax - lo) / static_cast<double>(G - 1);
  inv_h_ = h_ > 0.0 ? 1.0 / h_ : 0.0;  // h = 0: every point sits on node 0, exactly
  const double gmax = static_cast<double>(G - 1);
  for (int64_t u = 0; u < nu; ++u) tf_[u] = std::min(gmax, std::max(0.0, (s_[u] - lo) * inv_h_));

  // Kernel at node differences d h, and (FFT path) its spectra with 1/N folded in.
  for (int64_t d = -(G - 1); d <= G - 1; ++d) {
    double sg, dsg;
    sigmoid2(gamma * (static_cast<double>(d) * h_), &sg, &dsg);
    kS_[d + G - 1] = sg;
    kD_[d + G - 1] = dsg;
  }
  if (path_ != BinnedPath::kDirect) {
    double* zr = scratch_[0].zr.data();
    double* zi = scratch_[0].zi.data();
    std::fill(zr, zr + N, 0.0);
    std::fill(zi, zi + N, 0.0);
    for (int64_t d = -(G - 1); d <= G - 1; ++d) {
      const int64_t k = d >= 0 ? d : N + d;
      zr[k] = kS_[d + G - 1];
      zi[k] = kD_[d + G - 1];
    }
    fft_.forward(zr, zi);
    const double invN = 1.0 / static_cast<double>(N);
    for (int64_t f = 0; f < N; ++f) {
      const int64_t g = (N - f) & (N - 1);
      const double a = zr[f], b = zi[f], c = zr[g], d = zi[g];
      KSr_[f] = 0.5 * (a + c) * invN;
      KSi_[f] = 0.5 * (b - d) * invN;
      KD_[f] = 0.5 * (b + d) * invN;  // imaginary part vanishes: sigma' is even
    }
  }

  const bool want_v = grad != nullptr;
  const int64_t nchunk = nchunk_;
  int64_t nfft = 0;
  interrupt::Token* const tok = interrupt::current();  // at most 16 chunks: polls cost nothing
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt_) if (parallel_) schedule(dynamic, 1) reduction(+ : nfft)
#endif
  for (int64_t c = 0; c < nchunk; ++c) {
    if (tok != nullptr && tok->poll()) continue;  // cancelled: results are discarded
    const int tid = thread_index();
    Scratch& sc = scratch_[static_cast<size_t>(tid)];
    double* vb = vbuf_.data() + static_cast<size_t>(c) * nu;
    if (want_v) std::fill(vb, vb + nu, 0.0);
    const int64_t q0 = c * mc / nchunk, q1 = (c + 1) * mc / nchunk;
    for (int64_t q = q0; q < q1; ++q) nfft += column(q, w[q], want_v, vb, L, sc) ? 1 : 0;
  }
  n_fft_cols_ = nfft;

  if (want_v) {
    // v = sum of the chunk partials in chunk order, then weighted by the counts
    const double* vbuf = vbuf_.data();
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt_) if (parallel_rows_) schedule(static)
#endif
    for (int64_t u = 0; u < nu; ++u) {
      double acc = 0.0;
      for (int64_t c = 0; c < nchunk; ++c) acc += vbuf[static_cast<size_t>(c) * nu + u];
      cv_[u] = cnt_[u] * acc;
    }
    const double* cv = cv_.data();
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt_) if (parallel_rows_) schedule(static)
#endif
    for (int64_t q = 0; q < mc; ++q) {
      const uint64_t* bw = bits_.data() + q * nw;
      double bv = 0.0;
      for (int64_t k = 0; k < nw; ++k) {
        uint64_t x = bw[k];
        while (x) {
          bv += cv[k * 64 + lowest_bit(x)];
          x &= x - 1;
        }
      }
      double g = gamma * bv;
      if (pw_[q] > 0.0 && fw_[q] > 0.0) g += (L[q] - 0.5) - gamma * c_[q] * D_[q];
      grad[q] = g;
    }
  }

  double J = 0.0;
  for (int64_t q = 0; q < mc; ++q)
    if (pw_[q] > 0.0 && fw_[q] > 0.0) J += w[q] * (L[q] - 0.5);
  return J;
}

double surrogate_loo_auc_binned(const uint8_t* B, int64_t n, int64_t m, const double* w,
                                double gamma, const int64_t* counts, int64_t bins, double* L,
                                double* grad, bool parallel, int n_threads, BinnedPath path) {
  if (m <= 0) return 0.0;
  BinnedSurrogate ws(B, n, m, counts, nullptr, m, bins, parallel, n_threads, path);
  return ws.evaluate(w, gamma, L, grad);
}

// Same optimiser as aces_o_fit (aces_o.cpp, both in adam.hpp); only the
// surrogate differs.
void aces_o_fit_binned(const uint8_t* B, int64_t n, int64_t m, const double* logits0,
                       const uint8_t* active, double gamma, double lr, int64_t steps,
                       const int64_t* counts, int64_t bins, double* weights_out,
                       double* objective_out, bool parallel, int n_threads, BinnedPath path) {
  if (steps < 0) steps = 0;
  const std::vector<int64_t> act = adam::begin_fit(m, active, steps, weights_out, objective_out);
  if (act.empty()) return;
  BinnedSurrogate ws(B, n, m, counts, act.data(), static_cast<int64_t>(act.size()), bins, parallel,
                     n_threads, path);
  adam::fit(ws, act, logits0, gamma, lr, steps, weights_out, objective_out);
}

}  // namespace aces_fast
