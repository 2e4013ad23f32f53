// The per-column surrogate kernel with at most 32 kept rows in registers
// (AVX-512), bit for bit the generic per-column kernel of kernels/surrogate.cpp
// (SurrogateWorkspace::column + pair_block_fast): same products, same divisions,
// every sum in the same order. Below AVX-512 the generic kernel runs.
#pragma once

#include <cstdint>

namespace aces_fast {

// Inputs and outputs of one surrogate evaluation's columns.
struct SmallColumns {
  const double* E;       // (32) exp(-g (s - s0)) of the kept rows, zero beyond them
  const double* F;       // (32) exp(g (s - s0)) of the kept rows, zero beyond them
  const double* cnt;     // (32) multiplicities, zero beyond the kept rows
  const uint32_t* bits;  // (columns) bit r: kept row r passes
  const uint8_t* lists;  // (columns x kSmallList) from small_lists
  const double* pf;      // (columns) |P_j| |F_j| with multiplicities
  const double* w;       // (columns) weights
  const double* G;       // (columns) exp(gamma w_j)
  int ne;                // kept rows, 2..32
  bool unit;             // every multiplicity is 1
  double* L;             // (columns) out: L_j (NaN for a constant column)
  double* D;             // (columns) out: D_j = sum of c_p c_f sigma'
  double* c;             // (columns) out: c_j = w_j / (|P_j| |F_j|)
};

// Per column: bytes [0, 32) its inner rows ascending (then zeros), [32, 48) its
// outer rows ascending, [48, 80) for each kept row its position in its own list.
// Outer rows are the passers when |P| <= |F|, else the failers (the smaller
// class, as in the generic kernel). Fixed by the pass pattern: built once.
constexpr int kSmallList = 80;
void small_lists(uint32_t pass_bits, int ne, uint8_t* out);

// Columns [q0, q1): writes L, D, c and, when vb is not null, vb[r] (r < ne) =
// the share of v of these columns (summed in column order from +0.0). Requires
// the fast form (no exp(-z) can overflow, see surrogate.cpp).
using SmallColumnsFn = void (*)(const SmallColumns& a, int64_t q0, int64_t q1, double* vb);

// This process's kernel, or nullptr below AVX-512 (simd/dispatch.hpp).
SmallColumnsFn small_columns_kernel();

}  // namespace aces_fast
