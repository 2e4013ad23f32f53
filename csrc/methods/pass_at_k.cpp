// Pass@k of one ranking (see pass_at_k.hpp).
#include "methods/pass_at_k.hpp"

#include <algorithm>
#include <functional>

namespace aces_fast {

namespace {

// Pass@k from the level of s_k: above candidates above it (good_above of them
// correct), g in it (c correct), kk = min(k, n) picks.
double pass_from_counts(int64_t kk, int64_t above, int64_t good_above, int64_t g, int64_t c) {
  if (good_above > 0) return 1.0;
  const int64_t room = kk - above;
  if (room > g - c) return 1.0;  // some pick must be a correct one
  double p = 1.0;
  for (int64_t i = 0; i < room; ++i)
    p *= static_cast<double>(g - c - i) / static_cast<double>(g - i);
  return 1.0 - p;
}

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
  return pass_from_counts(kk, above, good_above, g, c);
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

void pass_at_ks_ordered(const double* s, const uint8_t* y, const int64_t* order, int64_t n,
                        const int64_t* ks, int64_t nk, double* out) {
  for (int64_t q = 0; q < nk; ++q) {
    const int64_t kk = std::min(ks[q], n);
    const double sk = s[order[kk - 1]];
    int64_t lo = kk - 1, hi = kk;
    while (lo > 0 && s[order[lo - 1]] == sk) --lo;
    while (hi < n && s[order[hi]] == sk) ++hi;
    int64_t good_above = 0, c = 0;
    for (int64_t r = 0; r < lo; ++r) good_above += y[order[r]] != 0 ? 1 : 0;
    for (int64_t r = lo; r < hi; ++r) c += y[order[r]] != 0 ? 1 : 0;
    out[q] = pass_from_counts(kk, lo, good_above, hi - lo, c);
  }
}

}  // namespace aces_fast
