// The ACES-O optimiser shared by the exact (aces_o.cpp) and binned (binned.cpp)
// fits: maximise J(softmax(logits)) over the active columns with Adam (docs/contract.rst
// §3). Only the surrogate differs between the two, so the loop is a
// template over it; both fits therefore run the same operations in the same
// order (bitwise-identical optimiser arithmetic).
//
// Per step: J and dJ/dw from the surrogate, chain rule through the softmax
// dJ/dl = w * (g - <w, g>), then one PyTorch-style Adam step on the loss -J:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps;  l -= lr / (1 - b1^t) * m / denom.
//
// Symmetric tests stay exactly equal (docs/contract.rst §7.5): where their
// gradients are equal in exact arithmetic the symmetric point can be an
// unstable equilibrium, which grows rounding noise of ~1e-17 geometrically into
// an O(1) difference within the steps, so without care each backend's
// summation order would pick its own direction. The columns are
// kept in classes of equal logits (SymmetryClasses): within a class dJ/dw is
// snapped like the tie-snapped scores, so a class's columns get identical
// updates, and a class splits where its gradients really differ.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/interrupt.hpp"
#include "simd/dispatch.hpp"
#include "simd/lanes.hpp"

namespace aces_fast {
namespace adam {

constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kEps = 1e-8;
// Snapping tolerance relative to max |value|: far above the ~1e-15 relative
// rounding noise of any backend's sums, far below differences that matter.
constexpr double kSnapRtol = 1e-10;
// These values are the contract's, defined in src/aces_fast/_constants.py;
// tests/test_constants.py checks that they agree.

// The element-wise loops, compiled once per SIMD level (simd/dispatch.hpp):
// every element goes through the same operations in every variant.
ACES_FAST_KERNEL_BODY void divide_body(double* __restrict w, std::size_t n, double sum) {
  for (std::size_t a = 0; a < n; ++a) w[a] /= sum;
}
constexpr simd::Dispatched<&divide_body, simd::kAvx512> divide{};

ACES_FAST_KERNEL_BODY void update_body(double* __restrict l, const double* __restrict w,
                                       const double* __restrict g, double* __restrict m1,
                                       double* __restrict m2, std::size_t n, double wg,
                                       double step_size, double bc2_sqrt) {
  for (std::size_t a = 0; a < n; ++a) {
    const double grad = -(w[a] * (g[a] - wg));  // gradient of the loss -J w.r.t. l_a
    m1[a] = kBeta1 * m1[a] + (1.0 - kBeta1) * grad;
    m2[a] = kBeta2 * m2[a] + (1.0 - kBeta2) * grad * grad;
    const double denom = std::sqrt(m2[a]) / bc2_sqrt + kEps;
    l[a] -= step_size * (m1[a] / denom);
  }
}
constexpr simd::Dispatched<&update_body, simd::kAvx512> update{};

// w = softmax(l), shifted by max(l) so exp cannot overflow. l nonempty; O(|l|).
inline void softmax(const std::vector<double>& l, std::vector<double>& w) {
  const int64_t n = static_cast<int64_t>(l.size());
  const double mx = lanes::max(l.data(), n);
  divide(w.data(), l.size(), lanes::exp_affine_sum(l.data(), n, 1.0, mx, w.data()));
}

// Zeroes the outputs (m weights, steps + 1 objectives; steps >= 0) and returns
// the indices of the active columns, ascending.
inline std::vector<int64_t> begin_fit(int64_t m, const uint8_t* active, int64_t steps,
                                      double* weights_out, double* objective_out) {
  std::fill(weights_out, weights_out + std::max<int64_t>(m, 0), 0.0);
  std::fill(objective_out, objective_out + steps + 1, 0.0);
  std::vector<int64_t> act;
  for (int64_t j = 0; j < m; ++j)
    if (active[j]) act.push_back(j);
  return act;
}

// One Adam step (t >= 1) on the logits l given the softmax weights w and dJ/dw g;
// m1, m2 are the first and second moments. O(|l|).
inline void step(std::vector<double>& l, const std::vector<double>& w, const std::vector<double>& g,
                 std::vector<double>& m1, std::vector<double>& m2, double lr, int64_t t) {
  const size_t ma = l.size();
  const double wg = lanes::dot(w.data(), g.data(), static_cast<int64_t>(ma));
  const double bc1 = 1.0 - std::pow(kBeta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(kBeta2, static_cast<double>(t));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  update(l.data(), w.data(), g.data(), m1.data(), m2.data(), ma, wg, step_size, bc2_sqrt);
}

// The classes of columns (positions 0..n-1 of the active columns) that are kept
// exactly equal. Only classes of two or more members are stored, one after the
// other in members_ (bounds_ delimit them): once every class is a singleton,
// snap() costs nothing.
class SymmetryClasses {
 public:
  // One class of all n positions, split by the starting logits x (snapped in
  // place, tol = kSnapRtol * max |x|): one class per distinct logit. O(n log n).
  void start(double* x, size_t n) {
    members_.resize(n);
    for (size_t a = 0; a < n; ++a) members_[a] = a;
    bounds_ = {0, n};
    double scale = 0.0;
    for (size_t a = 0; a < n; ++a)
      if (std::isfinite(x[a])) scale = std::max(scale, std::fabs(x[a]));
    snap(x, kSnapRtol * scale);
  }

  // Within every class sort x, give every run of neighbours at most tol apart
  // the run's smallest value, and keep the runs of two or more as the new
  // classes. A NaN joins no run. O(c log c) per class of c members.
  void snap(double* x, double tol) {
    if (bounds_.size() < 2) return;
    // NaN last, so that the comparison is a strict weak order
    const auto less = [x](size_t a, size_t b) {
      return std::isnan(x[b]) ? !std::isnan(x[a]) : x[a] < x[b];
    };
    next_members_.clear();
    next_bounds_.assign(1, 0);
    for (size_t c = 0; c + 1 < bounds_.size(); ++c) {
      size_t* p = members_.data() + bounds_[c];
      const size_t len = bounds_[c + 1] - bounds_[c];
      // A class whose values are all equal (as the zero gradients of tests every
      // kept row passes, every step) stays whole: no sort needed.
      bool equal = true;
      for (size_t i = 1; i < len && equal; ++i) equal = x[p[i]] == x[p[0]];
      if (equal && len >= 2) {
        next_members_.insert(next_members_.end(), p, p + len);
        next_bounds_.push_back(next_members_.size());
        continue;
      }
      std::sort(p, p + len, less);
      size_t run = 0;         // first member of the current run
      double prev = x[p[0]];  // unsnapped value of the previous member
      for (size_t i = 1; i <= len; ++i) {
        const double cur = i < len ? x[p[i]] : 0.0;
        if (i < len && cur - prev <= tol) {
          prev = cur;
          continue;
        }
        if (i - run >= 2) {
          for (size_t k = run; k < i; ++k) {
            x[p[k]] = x[p[run]];
            next_members_.push_back(p[k]);
          }
          next_bounds_.push_back(next_members_.size());
        }
        run = i;
        prev = cur;
      }
    }
    members_.swap(next_members_);
    bounds_.swap(next_bounds_);
  }

 private:
  std::vector<size_t> members_, bounds_, next_members_, next_bounds_;
};

// The snapping tolerance of dJ/dw: kSnapRtol times 1/2 + 3 gamma / 4, the bound
// on |dJ/dw_k| and on the sum of the magnitudes of the terms it adds up (w on
// the simplex; docs/contract.rst §7.5), which is what its rounding noise is
// relative to. Not max_k |dJ/dw_k|: that is itself noise when the gradient
// vanishes in exact arithmetic.
inline double gradient_snap_tol(double gamma) {
  return kSnapRtol * (0.5 + 0.75 * std::fabs(gamma));
}

// The fit proper, after begin_fit returned a nonempty act. Surrogate: any type
// with double evaluate(const double* w, double gamma, double* L, double* grad)
// over the |act| active columns (grad may be nullptr). Writes weights_out[act[a]]
// and objective_out[0..steps]. O(steps) surrogate evaluations + O(steps |act|).
// Symmetric columns are kept exactly equal by SymmetryClasses (start: snapped
// starting logits; every step: dJ/dw snapped within the classes), so the result
// does not depend on rounding there. Stops early, outputs unfinished, when the
// calling thread's interrupt token is cancelled (polled once per step).
template <class Surrogate>
void fit(Surrogate& ws, const std::vector<int64_t>& act, const double* logits0, double gamma,
         double lr, int64_t steps, double* weights_out, double* objective_out) {
  const size_t ma = act.size();
  std::vector<double> l(ma), w(ma), g(ma), L(ma), m1(ma, 0.0), m2(ma, 0.0);
  for (size_t a = 0; a < ma; ++a) l[a] = logits0[act[a]];
  SymmetryClasses classes;
  classes.start(l.data(), ma);
  const double snap_tol = gradient_snap_tol(gamma);
  softmax(l, w);
  for (int64_t t = 1; t <= steps; ++t) {
    if (interrupt::poll()) return;
    objective_out[t - 1] = ws.evaluate(w.data(), gamma, L.data(), g.data());
    classes.snap(g.data(), snap_tol);
    step(l, w, g, m1, m2, lr, t);
    softmax(l, w);
  }
  objective_out[steps] = ws.evaluate(w.data(), gamma, L.data(), nullptr);
  for (size_t a = 0; a < ma; ++a) weights_out[act[a]] = w[a];
}

}  // namespace adam
}  // namespace aces_fast
