// The ACES-O optimiser shared by the exact (aces_o.cpp) and binned (binned.cpp)
// fits: maximise J(softmax(logits)) over the active columns with Adam (SPEC
// section 3). Only the surrogate differs between the two, so the loop is a
// template over it; both fits therefore run the same operations in the same
// order (bitwise-identical optimiser arithmetic).
//
// Per step: J and dJ/dw from the surrogate, chain rule through the softmax
// dJ/dl = w * (g - <w, g>), then one PyTorch-style Adam step on the loss -J:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps;  l -= lr / (1 - b1^t) * m / denom.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/interrupt.hpp"
#include "simd/dispatch.hpp"

namespace aces_fast {
namespace adam {

constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kEps = 1e-8;

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
  double mx = l[0];
  for (double x : l) mx = std::max(mx, x);
  double sum = 0.0;
  for (size_t a = 0; a < l.size(); ++a) {
    w[a] = std::exp(l[a] - mx);
    sum += w[a];
  }
  divide(w.data(), l.size(), sum);
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
inline void step(std::vector<double>& l, const std::vector<double>& w,
                 const std::vector<double>& g, std::vector<double>& m1, std::vector<double>& m2,
                 double lr, int64_t t) {
  const size_t ma = l.size();
  double wg = 0.0;
  for (size_t a = 0; a < ma; ++a) wg += w[a] * g[a];
  const double bc1 = 1.0 - std::pow(kBeta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(kBeta2, static_cast<double>(t));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  update(l.data(), w.data(), g.data(), m1.data(), m2.data(), ma, wg, step_size, bc2_sqrt);
}

// The fit proper, after begin_fit returned a nonempty act. Surrogate: any type
// with double evaluate(const double* w, double gamma, double* L, double* grad)
// over the |act| active columns (grad may be nullptr). Writes weights_out[act[a]]
// and objective_out[0..steps]. O(steps) surrogate evaluations + O(steps |act|).
// Stops early, outputs unfinished, when the calling thread's interrupt token is
// cancelled (polled once per step).
template <class Surrogate>
void fit(Surrogate& ws, const std::vector<int64_t>& act, const double* logits0, double gamma,
         double lr, int64_t steps, double* weights_out, double* objective_out) {
  const size_t ma = act.size();
  std::vector<double> l(ma), w(ma), g(ma), L(ma), m1(ma, 0.0), m2(ma, 0.0);
  for (size_t a = 0; a < ma; ++a) l[a] = logits0[act[a]];
  softmax(l, w);
  for (int64_t t = 1; t <= steps; ++t) {
    if (interrupt::poll()) return;
    objective_out[t - 1] = ws.evaluate(w.data(), gamma, L.data(), g.data());
    step(l, w, g, m1, m2, lr, t);
    softmax(l, w);
  }
  objective_out[steps] = ws.evaluate(w.data(), gamma, L.data(), nullptr);
  for (size_t a = 0; a < ma; ++a) weights_out[act[a]] = w[a];
}

}  // namespace adam
}  // namespace aces_fast
