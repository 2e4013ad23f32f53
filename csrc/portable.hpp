// Compiler portability: the bit builtins and pragmas the kernels use, with their
// MSVC forms. GCC and Clang (clang-cl included) take the builtins; MSVC its
// intrinsics; anything else plain C++. The vector types are simd/vec.hpp.
#pragma once

#include <cstdint>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#define ACES_FAST_MSVC 1
#else
#define ACES_FAST_MSVC 0
#endif

namespace aces_fast {
namespace portable {

// x as loaded from memory by memcpy, read as a little-endian integer: byte k of
// memory at bits 8k..8k+7 (a byte swap on big-endian targets only).
inline uint64_t to_little_endian64(uint64_t x) {
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return __builtin_bswap64(x);
#else
  return x;  // x86, ARM and MSVC's targets are little-endian
#endif
}

// A hint to bring the cache line at p towards the core (into L2 and outward):
// nothing happens when the target has no such instruction. Never faults.
inline void prefetch_l2(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 2);
#elif ACES_FAST_MSVC && defined(_M_X64)
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
#else
  (void)p;
#endif
}

// Number of leading zero bits of x != 0 (0 .. 63).
inline int clz64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_clzll(x);
#elif ACES_FAST_MSVC && (defined(_M_X64) || defined(_M_ARM64))
  unsigned long index;
  _BitScanReverse64(&index, x);
  return 63 - static_cast<int>(index);
#else
  int n = 0;
  while (!(x & (uint64_t(1) << 63))) {
    x <<= 1;
    ++n;
  }
  return n;
#endif
}

// Index of the lowest set bit of x != 0 (0 .. 63).
inline int ctz64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctzll(x);
#elif ACES_FAST_MSVC && (defined(_M_X64) || defined(_M_ARM64))
  unsigned long index;
  _BitScanForward64(&index, x);
  return static_cast<int>(index);
#else
  int n = 0;
  while (!(x & 1)) {
    x >>= 1;
    ++n;
  }
  return n;
#endif
}

// Number of set bits of x. MSVC's __popcnt is the POPCNT instruction itself
// (no fallback), which x86-64 CPUs before 2008 lack: it is used only where the
// build targets AVX (/arch:AVX and up), as GCC's builtin is only a single
// instruction with -mpopcnt.
inline int popcount32(uint32_t x) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_popcount(x);
#elif ACES_FAST_MSVC && defined(__AVX__)
  return static_cast<int>(__popcnt(x));
#else
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  x = (x + (x >> 4)) & 0x0F0F0F0Fu;
  return static_cast<int>((x * 0x01010101u) >> 24);
#endif
}

// Number of set bits of x: the instruction where the build targets it (GCC and
// Clang: -mpopcnt or any -march that has it; MSVC: /arch:AVX and up), else SWAR
// (without the instruction GCC's builtin is a libgcc call, which is slower).
inline int popcount64(uint64_t x) {
#if (defined(__GNUC__) || defined(__clang__)) && defined(__POPCNT__)
  return __builtin_popcountll(x);
#elif ACES_FAST_MSVC && defined(_M_X64) && defined(__AVX__)
  return static_cast<int>(__popcnt64(x));
#else
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
#endif
}

}  // namespace portable
}  // namespace aces_fast

// `#pragma omp simd` (OpenMP 4.0; GCC and Clang honour it through
// -fopenmp-simd without the runtime). MSVC's /openmp is OpenMP 2.0 and rejects
// the directive (error C3001): there the loop is left to the auto-vectorizer.
#if ACES_FAST_MSVC
#define ACES_FAST_OMP_SIMD
#else
#define ACES_FAST_OMP_SIMD _Pragma("omp simd")
#endif
