// Instruction-set level of the process (see dispatch.hpp).
#include "simd/dispatch.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/simd.hpp"

#if ACES_FAST_X86_SIMD
#include <cpuid.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/utsname.h>
#endif
#endif

namespace aces_fast {
namespace simd {

namespace {

#if ACES_FAST_X86_SIMD
// CPUID feature bits (Intel SDM vol. 2A, CPUID leaves 1 and 7).
constexpr unsigned kLeaf1EcxPclmul = 1u << 1;
constexpr unsigned kLeaf1EcxSse41 = 1u << 19;
constexpr unsigned kLeaf1EcxPopcnt = 1u << 23;
constexpr unsigned kLeaf1EcxOsxsave = 1u << 27;
constexpr unsigned kLeaf1EcxAvx = 1u << 28;
constexpr unsigned kLeaf7EbxAvx2 = 1u << 5;
constexpr unsigned kLeaf7EbxAvx512f = 1u << 16;
constexpr unsigned kLeaf7EbxAvx512bw = 1u << 30;
constexpr unsigned kLeaf7EbxAvx512vl = 1u << 31;
// XCR0 state components the OS saves on context switch: SSE and AVX registers;
// AVX-512 opmask, upper halves of ZMM0-15, ZMM16-31.
constexpr uint64_t kXcr0Avx = 0x6;
constexpr uint64_t kXcr0Avx512 = 0xE6;

uint64_t xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

#if defined(__APPLE__)
bool sysctl_flag(const char* name) {
  int value = 0;
  size_t len = sizeof value;
  return sysctlbyname(name, &value, &len, nullptr, 0) == 0 && value != 0;
}

// macOS enables the AVX-512 register state on a thread's first AVX-512
// instruction, so XCR0 does not show it; the kernel reports support instead.
// Darwin before 21.3 (macOS 12.2) could corrupt the mask registers on return
// from a signal handler: no AVX-512 there.
bool os_avx512() {
  if (!(sysctl_flag("hw.optional.avx512f") && sysctl_flag("hw.optional.avx512bw") &&
        sysctl_flag("hw.optional.avx512vl")))
    return false;
  utsname u;
  int major = 0, minor = 0;
  if (uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 21 || (major == 21 && minor >= 3);
}
#else
bool os_avx512() { return (xcr0() & kXcr0Avx512) == kXcr0Avx512; }
#endif

// AVX2 needs POPCNT too (the packing kernels count bits with it) and PCLMULQDQ
// with SSE4.1 (the page checksums' fold; every AVX2 CPU has them); AVX-512
// needs F, BW and VL.
Level cpu_level() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return kPortable;
  const unsigned need1 =
      kLeaf1EcxPclmul | kLeaf1EcxSse41 | kLeaf1EcxPopcnt | kLeaf1EcxOsxsave | kLeaf1EcxAvx;
  if ((c & need1) != need1 || (xcr0() & kXcr0Avx) != kXcr0Avx) return kPortable;
  if (__get_cpuid_max(0, nullptr) < 7) return kPortable;
  __cpuid_count(7, 0, a, b, c, d);
  if (!(b & kLeaf7EbxAvx2)) return kPortable;
  const unsigned need7 = kLeaf7EbxAvx512f | kLeaf7EbxAvx512bw | kLeaf7EbxAvx512vl;
  return (b & need7) == need7 && os_avx512() ? kAvx512 : kAvx2;
}
#else
Level cpu_level() { return kPortable; }
#endif

// An unknown value of ACES_FAST_SIMD caps nothing.
Level detect() {
  Level lv = cpu_level();
  if (const char* cap = std::getenv("ACES_FAST_SIMD")) {
    if (std::strcmp(cap, "none") == 0)
      lv = kPortable;
    else if (std::strcmp(cap, "avx2") == 0 && lv > kAvx2)
      lv = kAvx2;
  }
  return lv;
}

}  // namespace

Level level() {
  static const Level lv = detect();
  return lv;
}

}  // namespace simd

const char* simd_level() {
  static const char* const names[] = {"none", "avx2", "avx512"};
  return names[simd::level()];
}

}  // namespace aces_fast
