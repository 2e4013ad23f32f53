// Pass@k of one ranking (see pass_at_k.hpp).
#include "methods/pass_at_k.hpp"

#include <algorithm>
#include <functional>

namespace aces_fast {

namespace {

// The levels above and at sk among s (n): counts of candidates and of correct ones.
double pass_at_level(const double* s, const uint8_t* y, int64_t n, int64_t kk, double sk) {
  int64_t above = 0, good_above = 0, g = 0, c = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t good = y[i] != 0 ? 1 : 0;
    const int64_t up = s[i] > sk ? 1 : 0;
    const int64_t at = s[i] == sk ? 1 : 0;
    above += up;
    good_above += up & good;
    g += at;
    c += at & good;
  }
  if (good_above > 0) return 1.0;
  const int64_t room = kk - above;
  if (room > g - c) return 1.0;  // some pick must be a correct one
  double p = 1.0;
  for (int64_t i = 0; i < room; ++i)
    p *= static_cast<double>(g - c - i) / static_cast<double>(g - i);
  return 1.0 - p;
}

constexpr int64_t kSmallTop = 32;

}  // namespace

void pass_at_ks_one(const double* s, const uint8_t* y, int64_t n, const int64_t* ks, int64_t nk,
                    double* out, PassScratch& scratch) {
  int64_t K = 0;
  for (int64_t q = 0; q < nk; ++q) K = std::max(K, std::min(ks[q], n));
  if (K <= kSmallTop) {
    // the K largest scores, descending, by insertion (repeats kept: the kk-th
    // largest counts equal scores separately, as a sort would)
    double top[kSmallTop];
    int64_t have = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = s[i];
      if (have == K && !(v > top[K - 1])) continue;
      int64_t q = have < K ? have++ : K - 1;
      for (; q > 0 && top[q - 1] < v; --q) top[q] = top[q - 1];
      top[q] = v;
    }
    // Every s_k is one of the top K, so only scores >= top[K - 1] can be above or
    // at a level: gather those few (with their labels) in one pass and count
    // each k's levels among them, instead of a pass over all n per k.
    const double floor = top[K - 1];
    scratch.s.clear();
    scratch.y.clear();
    for (int64_t i = 0; i < n; ++i)
      if (s[i] >= floor) {
        scratch.s.push_back(s[i]);
        scratch.y.push_back(y[i]);
      }
    const int64_t nz = static_cast<int64_t>(scratch.s.size());
    for (int64_t q = 0; q < nk; ++q) {
      const int64_t kk = std::min(ks[q], n);
      out[q] = pass_at_level(scratch.s.data(), scratch.y.data(), nz, kk, top[kk - 1]);
    }
    return;
  }
  for (int64_t q = 0; q < nk; ++q) {
    const int64_t kk = std::min(ks[q], n);
    scratch.s.assign(s, s + n);
    std::nth_element(scratch.s.begin(), scratch.s.begin() + (kk - 1), scratch.s.end(),
                     std::greater<double>());
    out[q] = pass_at_level(s, y, n, kk, scratch.s[static_cast<size_t>(kk - 1)]);
  }
}

}  // namespace aces_fast
