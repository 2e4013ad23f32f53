// One run-time dispatch for every vectorized kernel.
//
// A kernel has one variant per instruction-set level: portable code, AVX2 and
// AVX-512 (a level without a variant of its own runs the one below it). The
// process picks a level once, on first use: the best one the CPU and the
// operating system support, capped by the environment variable
// ACES_FAST_SIMD=avx512|avx2|none, so the tests can run every variant on one
// machine. Non-x86 builds compile the portable variants only.
//
// Variants are plain functions compiled with __attribute__((target(...))): either
// hand-written intrinsics (simd.cpp) or one generic body compiled once per level
// (Compiled below), the body being inlined into a wrapper carrying the target.
// Every variant of a kernel returns bitwise the same result: integer kernels
// trivially, float kernels by a fixed operation order (explicit lanes, no
// reassociation; -ffp-contract=off rules out fused multiply-add).
//
// Kernels dispatched this way (variants):
//   simd.cpp      uniform LOO-AUC level step (AVX2 intrinsics; none portable)
//                 and whole column block (AVX-512 intrinsics; AVX2 too while at
//                 most 361 rows count, in 16-bit lanes; none below), row
//                 packing (portable, AVX2, AVX-512), row scores (portable,
//                 AVX-512), count_rows (portable; POPCNT from AVX2 on),
//                 max_byte (portable, AVX2), less_counts (AVX2,
//                 AVX-512; none portable: methods.cpp then sorts without it)
//   loo_auc.cpp   uniform_block, row_scores (its groups of eight rows)
//                 (portable, AVX2)
//   surrogate.cpp pair_block_fast, pair_sweep2, add_scaled_row, masked_sums
//                 (portable, AVX2, AVX-512; pair_block_fast's AVX2 variant and
//                 masked_sums' AVX2 and AVX-512 ones are hand-written, in
//                 simd/surrogate_simd.cpp: GCC spilled the generic eight-lane
//                 bodies out of AVX2's sixteen registers)
//   small_columns.cpp  the per-column surrogate kernel with the rows in
//                 registers (AVX-512 intrinsics; none below: the generic
//                 per-column code of surrogate.cpp runs, same bits)
//   methods.cpp   column_sums (portable, AVX2), rank_sort (portable, AVX2)
//   lanes.hpp     exp over an array (exp_affine_sum), dot, max -- used by
//                 the surrogate and the Adam loop (portable, AVX2, AVX-512)
//   crc32_fold.cpp  the part files' page checksums (io/codecs.cpp: tables
//                 below AVX2, the fold from AVX2 on; same value, it is a CRC)
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ACES_FAST_X86_SIMD 1
#define ACES_FAST_TARGET_AVX2 __attribute__((target("avx2")))
#define ACES_FAST_TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define ACES_FAST_X86_SIMD 0
#endif

// A generic kernel body: always inlined, so that it is compiled with the
// instruction set of each wrapper that calls it. An OpenMP region inside a body
// would be outlined with the default instruction set: keep them outside.
#if defined(__GNUC__) || defined(__clang__)
#define ACES_FAST_KERNEL_BODY __attribute__((always_inline)) inline
#else
#define ACES_FAST_KERNEL_BODY inline
#endif

namespace aces_fast {
namespace simd {

enum Level : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

// The level of this process: the CPU's (with the OS-enabled register state),
// capped by ACES_FAST_SIMD. Detected on first call, then fixed.
Level level();

// The variant of each level; pointers may be null only where the caller
// handles null (the uniform level step).
template <class F>
struct Variants {
  F portable;
  F avx2;
  F avx512;
};

template <class F>
F pick(const Variants<F>& v) {
  switch (level()) {
    case kAvx512:
      return v.avx512;
    case kAvx2:
      return v.avx2;
    default:
      return v.portable;
  }
}

// Body (an ACES_FAST_KERNEL_BODY function) compiled once per level.
template <auto Body>
struct Compiled;

template <class R, class... A, R (*Body)(A...)>
struct Compiled<Body> {
  static R portable(A... a) { return Body(a...); }
#if ACES_FAST_X86_SIMD
  ACES_FAST_TARGET_AVX2 static R avx2(A... a) { return Body(a...); }
  ACES_FAST_TARGET_AVX512 static R avx512(A... a) { return Body(a...); }
#endif
};

// The variants of Body up to level Widest (kAvx2: the AVX-512 level runs the
// AVX2 variant).
template <auto Body, Level Widest>
Variants<decltype(Body)> variants_of() {
  using C = Compiled<Body>;
#if ACES_FAST_X86_SIMD
  if constexpr (Widest == kAvx512)
    return {C::portable, C::avx2, C::avx512};
  else if constexpr (Widest == kAvx2)
    return {C::portable, C::avx2, C::avx2};
  else
    return {C::portable, C::portable, C::portable};
#else
  return {C::portable, C::portable, C::portable};
#endif
}

// This process's variant of Body, selected on the first call.
template <auto Body, Level Widest>
decltype(Body) kernel() {
  static const decltype(Body) f = pick(variants_of<Body, Widest>());
  return f;
}

// A callable that runs this process's variant of Body, so that
//   constexpr simd::Dispatched<&f_body, simd::kAvx2> f{};
// makes every call f(...) dispatch.
template <auto Body, Level Widest>
struct Dispatched;

template <class R, class... A, R (*Body)(A...), Level Widest>
struct Dispatched<Body, Widest> {
  R operator()(A... a) const { return kernel<Body, Widest>()(a...); }
};

}  // namespace simd
}  // namespace aces_fast
