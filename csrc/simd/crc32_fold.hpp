// CRC-32 (zlib's polynomial) by folding with carry-less multiplication (Gopal
// et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction", Intel 2009, in its bit-reflected form): four 128-bit lanes
// fold 64 bytes a step, are folded into one, then reduced to 32 bits by
// Barrett's method. The constants are x^k mod P(x) for the distances folded
// over, and P(x)'s Barrett quotient. The AVX2 level's CRC (io/codecs.cpp
// calls it from there on; the tables below it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/dispatch.hpp"

namespace aces_fast {
namespace simd {

#if ACES_FAST_X86_SIMD
// n >= 64 and a multiple of 16; crc and the result not inverted (zlib's crc32
// is ~crc32_fold(p, n, ~crc)). O(n), a few GB/s.
uint32_t crc32_fold(const uint8_t* p, size_t n, uint32_t crc);
#endif

}  // namespace simd
}  // namespace aces_fast
