// AVX2 and AVX-512 variants of the surrogate's pair_block_fast and masked_sums
// (x86-64 builds with GCC or Clang only: ACES_FAST_X86_SIMD). Their contracts
// and portable variants are in csrc/kernels/surrogate.cpp; every variant returns
// the same bits.
#pragma once

#include <cstdint>

#include "simd/dispatch.hpp"

#if ACES_FAST_X86_SIMD
namespace aces_fast {
namespace surrogate_simd {

// pair_block_fast at AVX2 (the generic body covers AVX-512).
void pair_block_fast_avx2(const double* oa, const double* oc, double* od, int64_t no,
                          const double* x, const double* ci, double* acc, int64_t ni8,
                          double* sum_sig, double* sum_dsig);

// masked_sums at AVX2 and AVX-512.
void masked_sums_avx2(const uint8_t* bytes, int64_t ng, int64_t nk, const double* vals,
                      double* out);
void masked_sums_avx512(const uint8_t* bytes, int64_t ng, int64_t nk, const double* vals,
                        double* out);

}  // namespace surrogate_simd
}  // namespace aces_fast
#endif
