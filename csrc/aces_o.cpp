// ACES-O: maximise J(softmax(logits)) with Adam, entirely in C++ (SPEC section 3).
//
// Only the active columns enter the surrogate (inactive columns have weight 0,
// so they change neither the scores nor J). Per step: J and dJ/dw from the
// surrogate workspace (no allocation), chain rule through the softmax
// dJ/dl = w * (g - <w, g>), then one PyTorch-style Adam step on the loss -J:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps;  l -= lr / (1 - b1^t) * m / denom.
#include "kernels.hpp"

#include <algorithm>
#include <cmath>

namespace aces_fast {

namespace {

constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kEps = 1e-8;

void softmax(const std::vector<double>& l, std::vector<double>& w) {
  double mx = l[0];
  for (double x : l) mx = std::max(mx, x);
  double sum = 0.0;
  for (size_t a = 0; a < l.size(); ++a) {
    w[a] = std::exp(l[a] - mx);
    sum += w[a];
  }
  for (size_t a = 0; a < l.size(); ++a) w[a] /= sum;
}

}  // namespace

void aces_o_fit(const uint8_t* B, int64_t n, int64_t m, const double* logits0,
                const uint8_t* active, double gamma, double lr, int64_t steps,
                const int64_t* counts, double* weights_out, double* objective_out, bool parallel,
                int n_threads) {
  if (steps < 0) steps = 0;
  std::fill(weights_out, weights_out + std::max<int64_t>(m, 0), 0.0);
  std::fill(objective_out, objective_out + steps + 1, 0.0);
  std::vector<int64_t> act;
  for (int64_t j = 0; j < m; ++j)
    if (active[j]) act.push_back(j);
  if (act.empty()) return;
  const size_t ma = act.size();

  SurrogateWorkspace ws(B, n, m, counts, act.data(), static_cast<int64_t>(ma), parallel,
                        n_threads);
  std::vector<double> l(ma), w(ma), g(ma), L(ma), m1(ma, 0.0), m2(ma, 0.0);
  for (size_t a = 0; a < ma; ++a) l[a] = logits0[act[a]];
  softmax(l, w);

  for (int64_t t = 1; t <= steps; ++t) {
    objective_out[t - 1] = ws.evaluate(w.data(), gamma, L.data(), g.data());
    double wg = 0.0;
    for (size_t a = 0; a < ma; ++a) wg += w[a] * g[a];
    const double bc1 = 1.0 - std::pow(kBeta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(kBeta2, static_cast<double>(t));
    const double step_size = lr / bc1;
    const double bc2_sqrt = std::sqrt(bc2);
    for (size_t a = 0; a < ma; ++a) {
      const double grad = -(w[a] * (g[a] - wg));  // gradient of the loss -J w.r.t. l_a
      m1[a] = kBeta1 * m1[a] + (1.0 - kBeta1) * grad;
      m2[a] = kBeta2 * m2[a] + (1.0 - kBeta2) * grad * grad;
      const double denom = std::sqrt(m2[a]) / bc2_sqrt + kEps;
      l[a] -= step_size * (m1[a] / denom);
    }
    softmax(l, w);
  }
  objective_out[steps] = ws.evaluate(w.data(), gamma, L.data(), nullptr);
  for (size_t a = 0; a < ma; ++a) weights_out[act[a]] = w[a];
}

}  // namespace aces_fast
