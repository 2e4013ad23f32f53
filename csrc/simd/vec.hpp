// Fixed-width vectors of 64-bit lanes for the generic kernel bodies: the one
// place that names the GCC/Clang vector extension.
//
//   v8d, v8l   eight double / int64 lanes     v4d, v4u   four double / uint64
//   v2d, v2u   two double / uint64
//
// Element-wise + - * / (IEEE, one rounding each: -ffp-contract=off, and MSVC
// emits no FMA below /arch:AVX2), integer + - & | ^ << >>, a vector with a
// scalar (broadcast), comparisons giving int64 lane masks (all ones or 0), and
// v[i]. Two operations have no operator form in standard C++ and go through
// macros:
//   ACES_FAST_VSELECT(mask, a, b)  lane-wise mask ? a : b
//   ACES_FAST_VCAST(T, v)          the same 64 bytes as vector type T
//
// With GCC or Clang (clang-cl included) these are the vector extension's types,
// compiled to the registers of each SIMD level (simd/dispatch.hpp). Elsewhere
// (MSVC) and with -DACES_FAST_NO_VECTOR_EXTENSIONS, Vec below: a struct of N
// lanes whose operators loop over them, the same IEEE operations in the same
// order, so the same bits (tools/check_portability.sh builds it with GCC and
// runs tests/test_simd.py and the cpp golden digests against it). Integer lanes wrap modulo 2^64 in
// both forms.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(ACES_FAST_NO_VECTOR_EXTENSIONS)
#define ACES_FAST_VECTOR_EXTENSIONS 1
#else
#define ACES_FAST_VECTOR_EXTENSIONS 0
#endif

namespace aces_fast {
namespace vec {

#if ACES_FAST_VECTOR_EXTENSIONS

typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8l __attribute__((vector_size(64)));
typedef double v4d __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));
typedef double v2d __attribute__((vector_size(16)));
typedef uint64_t v2u __attribute__((vector_size(16)));

#define ACES_FAST_VSELECT(mask, a, b) ((mask) ? (a) : (b))
#define ACES_FAST_VCAST(T, v) reinterpret_cast<T>(v)

#else

template <class T, int N>
struct Vec {
  static_assert(sizeof(T) == 8, "64-bit lanes only");
  T lane[N];
  T& operator[](int i) { return lane[i]; }
  const T& operator[](int i) const { return lane[i]; }
};

template <int N>
using Mask = Vec<int64_t, N>;

namespace detail {
// Integer lanes in uint64 arithmetic (wraps, as the vector extension does);
// doubles as they are.
template <class T>
inline T add(T a, T b) {
  if constexpr (std::is_integral<T>::value)
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <class T>
inline T sub(T a, T b) {
  if constexpr (std::is_integral<T>::value)
    return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else
    return a - b;
}
template <class T>
inline T mul(T a, T b) {
  if constexpr (std::is_integral<T>::value)
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}
template <class T>
inline T shl(T a, int64_t s) {
  return static_cast<T>(static_cast<uint64_t>(a) << s);
}
}  // namespace detail

#define ACES_FAST_VEC_BINARY(op, expr)                                           \
  template <class T, int N>                                                      \
  inline Vec<T, N> operator op(const Vec<T, N>& a, const Vec<T, N>& b) {         \
    Vec<T, N> r;                                                                 \
    for (int i = 0; i < N; ++i) {                                                \
      const T x = a.lane[i], y = b.lane[i];                                      \
      r.lane[i] = (expr);                                                        \
    }                                                                            \
    return r;                                                                    \
  }                                                                              \
  template <class T, int N, class S,                                             \
            class = typename std::enable_if<std::is_arithmetic<S>::value>::type> \
  inline Vec<T, N> operator op(const Vec<T, N>& a, S s) {                        \
    Vec<T, N> r;                                                                 \
    const T y = static_cast<T>(s);                                               \
    for (int i = 0; i < N; ++i) {                                                \
      const T x = a.lane[i];                                                     \
      r.lane[i] = (expr);                                                        \
    }                                                                            \
    return r;                                                                    \
  }                                                                              \
  template <class T, int N, class S,                                             \
            class = typename std::enable_if<std::is_arithmetic<S>::value>::type> \
  inline Vec<T, N> operator op(S s, const Vec<T, N>& b) {                        \
    Vec<T, N> r;                                                                 \
    const T x = static_cast<T>(s);                                               \
    for (int i = 0; i < N; ++i) {                                                \
      const T y = b.lane[i];                                                     \
      r.lane[i] = (expr);                                                        \
    }                                                                            \
    return r;                                                                    \
  }                                                                              \
  template <class T, int N, class U>                                             \
  inline Vec<T, N>& operator op##=(Vec<T, N>& a, const U & b) {                  \
    a = a op b;                                                                  \
    return a;                                                                    \
  }

ACES_FAST_VEC_BINARY(+, detail::add(x, y))
ACES_FAST_VEC_BINARY(-, detail::sub(x, y))
ACES_FAST_VEC_BINARY(*, detail::mul(x, y))
ACES_FAST_VEC_BINARY(/, x / y)
ACES_FAST_VEC_BINARY(&, x& y)
ACES_FAST_VEC_BINARY(|, x | y)
ACES_FAST_VEC_BINARY(^, x ^ y)
ACES_FAST_VEC_BINARY(<<, detail::shl(x, static_cast<int64_t>(y)))
// >> on int64 lanes is arithmetic, as the vector extension's (and every
// compiler's, implementation-defined before C++20)
ACES_FAST_VEC_BINARY(>>, x >> y)
#undef ACES_FAST_VEC_BINARY

template <class T, int N>
inline Vec<T, N> operator-(const Vec<T, N>& a) {
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = detail::sub(T(0), a.lane[i]);
  return r;
}

#define ACES_FAST_VEC_COMPARE(op)                                            \
  template <class T, int N>                                                  \
  inline Mask<N> operator op(const Vec<T, N>& a, const Vec<T, N>& b) {       \
    Mask<N> r;                                                               \
    for (int i = 0; i < N; ++i) r.lane[i] = a.lane[i] op b.lane[i] ? -1 : 0; \
    return r;                                                                \
  }
ACES_FAST_VEC_COMPARE(<)
ACES_FAST_VEC_COMPARE(>)
ACES_FAST_VEC_COMPARE(<=)
ACES_FAST_VEC_COMPARE(>=)
ACES_FAST_VEC_COMPARE(==)
ACES_FAST_VEC_COMPARE(!=)
#undef ACES_FAST_VEC_COMPARE

template <class T, int N>
inline Vec<T, N> select(const Mask<N>& m, const Vec<T, N>& a, const Vec<T, N>& b) {
  Vec<T, N> r;
  for (int i = 0; i < N; ++i) r.lane[i] = m.lane[i] ? a.lane[i] : b.lane[i];
  return r;
}

template <class To, class From>
inline To bitcast(const From& v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}

typedef Vec<double, 8> v8d;
typedef Vec<int64_t, 8> v8l;
typedef Vec<double, 4> v4d;
typedef Vec<uint64_t, 4> v4u;
typedef Vec<double, 2> v2d;
typedef Vec<uint64_t, 2> v2u;

#define ACES_FAST_VSELECT(mask, a, b) ::aces_fast::vec::select((mask), (a), (b))
#define ACES_FAST_VCAST(T, v) ::aces_fast::vec::bitcast<T>(v)

#endif

}  // namespace vec
}  // namespace aces_fast
