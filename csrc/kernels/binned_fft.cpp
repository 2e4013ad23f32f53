// Radix-2 decimation-in-time complex FFT for the binned surrogate (binned.hpp).
//
// Split real/imaginary arrays so the butterfly loop vectorises; twiddles are
// tabulated per stage (contiguous, computed directly with cos/sin rather than by
// recurrence, so their error is one rounding each).
#include <cmath>
#include <stdexcept>
#include <utility>

#include "kernels/binned.hpp"
#include "portable.hpp"

namespace aces_fast {

Fft::Fft(int64_t n) : n_(n) {
  if (n < 2 || (n & (n - 1)) != 0) throw std::invalid_argument("Fft: size must be a power of 2");
  int lg = 0;
  while ((int64_t(1) << lg) < n) ++lg;
  rev_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t r = 0;
    for (int b = 0; b < lg; ++b)
      if (i & (int64_t(1) << b)) r |= uint32_t(1) << (lg - 1 - b);
    rev_[static_cast<size_t>(i)] = r;
  }
  twr_.resize(static_cast<size_t>(n));
  twi_.resize(static_cast<size_t>(n));
  const double pi = std::acos(-1.0);
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t j = 0; j < h; ++j) {
      const double a = -pi * static_cast<double>(j) / static_cast<double>(h);
      twr_[static_cast<size_t>(h - 1 + j)] = std::cos(a);
      twi_[static_cast<size_t>(h - 1 + j)] = std::sin(a);
    }
}

void Fft::forward(double* re, double* im) const {
  const int64_t n = n_;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = rev_[static_cast<size_t>(i)];
    if (i < j) {
      std::swap(re[i], re[j]);
      std::swap(im[i], im[j]);
    }
  }
  for (int64_t i = 0; i < n; i += 2) {
    const double ar = re[i], ai = im[i], br = re[i + 1], bi = im[i + 1];
    re[i] = ar + br;
    im[i] = ai + bi;
    re[i + 1] = ar - br;
    im[i + 1] = ai - bi;
  }
  for (int64_t h = 2; h < n; h *= 2) {
    const double* __restrict wr = twr_.data() + (h - 1);
    const double* __restrict wi = twi_.data() + (h - 1);
    for (int64_t i = 0; i < n; i += 2 * h) {
      double* __restrict r0 = re + i;
      double* __restrict i0 = im + i;
      double* __restrict r1 = re + i + h;
      double* __restrict i1 = im + i + h;
      ACES_FAST_OMP_SIMD
      for (int64_t j = 0; j < h; ++j) {
        const double xr = r1[j] * wr[j] - i1[j] * wi[j];
        const double xi = r1[j] * wi[j] + i1[j] * wr[j];
        const double ar = r0[j], ai = i0[j];
        r0[j] = ar + xr;
        i0[j] = ai + xi;
        r1[j] = ar - xr;
        i1[j] = ai - xi;
      }
    }
  }
}

}  // namespace aces_fast
