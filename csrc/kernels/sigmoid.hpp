// The logistic function for the surrogate kernels (surrogate.cpp, binned.cpp).
#pragma once

#include <cmath>

namespace aces_fast {

// sigma(x) and sigma'(x) = sigma(x) (1 - sigma(x)) without overflow for any
// finite x: only exp(-|x|) <= 1 is formed.
inline void sigmoid2(double x, double* sg, double* dsg) {
  const double e = std::exp(-std::fabs(x));
  const double q = 1.0 / (1.0 + e);
  *sg = x >= 0.0 ? q : e * q;
  *dsg = e * q * q;
}

}  // namespace aces_fast
