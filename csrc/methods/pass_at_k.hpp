// Exact Pass@k of a ranking with ties broken at random (aces_fast.pass_at_k,
// docs/contract.rst), for many tasks at once: the dataset runs' pass@k columns.
#pragma once

#include <cstdint>
#include <vector>

namespace aces_fast {

// Pass@k of one task for every k of ks (nk values, each >= 1) into out (nk):
// scores s (n >= 1, not NaN), labels y (n, 0/1). Bit for bit
// aces_fast.pass_at_k: with s_k the min(k, n)-th largest score, the candidates
// above s_k fit whole (a correct one there gives 1); in the level of s_k, g tied
// candidates with c correct and r places left all miss with probability
// prod_{i<r} (g-c-i)/(g-i), multiplied in that order. For K = the largest
// min(k, n) up to 32: O(n K) worst case, O(n) typically (one pass keeps the top
// K sorted, a second gathers the z scores >= the K-th largest and their labels
// into scratch, and each k counts its levels among those z); else O(n) per k (a
// selection on a copy of s in scratch).
struct PassScratch {
  std::vector<double> s;   // gathered scores, or a copy of s to select in
  std::vector<uint8_t> y;  // the gathered scores' labels
};
void pass_at_ks_one(const double* s, const uint8_t* y, int64_t n, const int64_t* ks, int64_t nk,
                    double* out, PassScratch& scratch);

// pass_at_ks_one, bit for bit, given the task's order too: order (n) lists the
// candidates by descending s (equal scores next to each other, as the methods'
// order puts them). The level of each s_k is then the run of equal scores
// around place k - 1, and the candidates above it the places before the run:
// O(k + the run's length) per k, against one or two passes over all n.
void pass_at_ks_ordered(const double* s, const uint8_t* y, const int64_t* order, int64_t n,
                        const int64_t* ks, int64_t nk, double* out);

}  // namespace aces_fast
