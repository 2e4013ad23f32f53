// Eight explicit double lanes (simd/vec.hpp) and the element-wise
// kernels built on them: exp over an array and lane-wise sums.
//
// Every function here is inlined into the kernel bodies of simd/dispatch.hpp,
// which compile them once per instruction-set level. A v8d operation is eight
// IEEE operations whatever the level (two SSE2 registers ... one AVX-512
// register), and a sum is always formed in the same eight lanes combined by
// the same tree (hsum8), so every variant returns the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "simd/dispatch.hpp"
#include "simd/vec.hpp"

namespace aces_fast {
namespace lanes {

using vec::v8d;
using vec::v8l;

// Helpers pass vectors by reference: by value would change the ABI between
// the variants (-Wpsabi); everything inlines anyway.
ACES_FAST_KERNEL_BODY void load8(v8d& v, const double* p) { std::memcpy(&v, p, sizeof v); }
ACES_FAST_KERNEL_BODY void store8(double* p, const v8d& v) { std::memcpy(p, &v, sizeof v); }
// v = (x, ..., x): a vector-scalar operation is a broadcast (an element loop is
// not turned into one by GCC); in integers, so that -0.0 stays -0.0.
ACES_FAST_KERNEL_BODY void splat8(v8d& v, double x) {
  int64_t b;
  std::memcpy(&b, &x, sizeof b);
  const v8l zero = {};
  v = ACES_FAST_VCAST(v8d, zero + b);
}
ACES_FAST_KERNEL_BODY double hsum8(const v8d& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// exp(x) lane by lane for x <= 709 (NaN stays NaN; below about -745, +0).
// x = k ln2 + r with k = round(x / ln2) (|r| <= ln2 / 2, ln2 split in two parts
// so that k ln2_hi is exact), exp(r) by its Taylor polynomial of degree 13 in
// Horner form (truncation < 5e-18 relative), times 2^k formed in the exponent
// bits -- as two factors 2^(k/2) 2^(k - k/2), so that results below the normal
// range round to subnormals instead of wrapping. Error about 1 ulp. Only IEEE
// multiplies and adds, no table: the same bits in every variant.
ACES_FAST_KERNEL_BODY void exp8(v8d& y, const v8d& x0) {
  v8d lo, shifter, log2e, ln2hi, ln2lo;
  splat8(lo, -746.0);
  splat8(shifter, 6755399441055744.0);  // 1.5 * 2^52: adding it rounds to an integer
  splat8(log2e, 1.4426950408889634);
  splat8(ln2hi, 6.93147180369123816490e-01);  // 32 significant bits
  splat8(ln2lo, 1.90821492927058770002e-10);
  const v8d x = ACES_FAST_VSELECT(x0 < lo, lo, x0);  // a NaN compares false and stays
  const v8d kd0 = x * log2e + shifter;
  const v8l ki = ACES_FAST_VCAST(v8l, kd0) - ACES_FAST_VCAST(v8l, shifter);
  const v8d kd = kd0 - shifter;
  const v8d r = (x - kd * ln2hi) - kd * ln2lo;
  // 1/13!, ..., 1/2!, 1, 1
  static constexpr double c[14] = {1.6059043836821613e-10,
                                   2.08767569878681e-09,
                                   2.505210838544172e-08,
                                   2.755731922398589e-07,
                                   2.7557319223985893e-06,
                                   2.48015873015873e-05,
                                   0.0001984126984126984,
                                   0.001388888888888889,
                                   0.008333333333333333,
                                   0.041666666666666664,
                                   0.16666666666666666,
                                   0.5,
                                   1.0,
                                   1.0};
  v8d p, ck;
  splat8(p, c[0]);
  for (int i = 1; i < 14; ++i) {
    splat8(ck, c[i]);
    p = p * r + ck;
  }
  const v8l k1 = ki >> 1;
  const v8l k2 = ki - k1;
  const v8l bias = {1023, 1023, 1023, 1023, 1023, 1023, 1023, 1023};
  const v8d s1 = ACES_FAST_VCAST(v8d, (k1 + bias) << 52);
  const v8d s2 = ACES_FAST_VCAST(v8d, (k2 + bias) << 52);
  y = (p * s1) * s2;
}

// out[i] = exp(a (x[i] - b)) for i < n, each argument at most 709 (one
// subtraction, one multiply, exp8); returns their sum in eight lanes (lane
// i mod 8) combined by hsum8. O(n).
ACES_FAST_KERNEL_BODY double exp_affine_sum_body(const double* __restrict x, int64_t n, double a,
                                                 double b, double* __restrict out) {
  v8d va, vb, acc, y;
  splat8(va, a);
  splat8(vb, b);
  splat8(acc, 0.0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8d xi;
    load8(xi, x + i);
    exp8(y, va * (xi - vb));
    store8(out + i, y);
    acc += y;
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    alignas(64) double buf[8] = {};
    for (int k = 0; k < rest; ++k) buf[k] = x[i + k];
    v8d xi;
    load8(xi, buf);
    exp8(y, va * (xi - vb));
    for (int k = 0; k < 8; ++k) buf[k] = k < rest ? y[k] : 0.0;
    for (int k = 0; k < rest; ++k) out[i + k] = buf[k];
    load8(y, buf);
    acc += y;
  }
  return hsum8(acc);
}
constexpr simd::Dispatched<&exp_affine_sum_body, simd::kAvx512> exp_affine_sum{};

// sum over i < n of x[i] y[i] in eight lanes, combined by hsum8. O(n).
ACES_FAST_KERNEL_BODY double dot_body(const double* __restrict x, const double* __restrict y,
                                      int64_t n) {
  v8d acc;
  splat8(acc, 0.0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8d xi, yi;
    load8(xi, x + i);
    load8(yi, y + i);
    acc += xi * yi;
  }
  alignas(64) double buf[8] = {};
  for (int k = 0; i + k < n; ++k) buf[k] = x[i + k] * y[i + k];
  v8d t;
  load8(t, buf);
  acc += t;
  return hsum8(acc);
}
constexpr simd::Dispatched<&dot_body, simd::kAvx512> dot{};

// max over i < n of x[i] (n >= 1; NaN-free input), in eight lanes: exact, so
// the same value as a sequential max, without its chain of dependent
// compare-and-moves through memory. O(n).
ACES_FAST_KERNEL_BODY double max_body(const double* __restrict x, int64_t n) {
  v8d acc;
  splat8(acc, x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8d xi;
    load8(xi, x + i);
    acc = ACES_FAST_VSELECT(xi > acc, xi, acc);
  }
  double mx = acc[0];
  for (int k = 1; k < 8; ++k) mx = acc[k] > mx ? acc[k] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  return mx;
}
constexpr simd::Dispatched<&max_body, simd::kAvx512> max{};

}  // namespace lanes
}  // namespace aces_fast
