#include "io/codecs.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "portable.hpp"
#include "simd/crc32_fold.hpp"
#include "simd/dispatch.hpp"

namespace aces_fast::io {

namespace {

using Tables = std::array<std::array<uint32_t, 256>, 16>;

Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t s = 1; s < 16; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 255];
  return t;
}

inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (the package builds for those)
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// the table-driven CRC, sixteen bytes a step
uint32_t crc32_tables(const uint8_t* p, size_t n, uint32_t crc) {
  static const Tables t = make_tables();
  crc = ~crc;
  for (; n >= 16; n -= 16, p += 16) {
    const uint32_t a = crc ^ load32(p);
    const uint32_t b = load32(p + 4);
    const uint32_t c = load32(p + 8);
    const uint32_t d = load32(p + 12);
    crc = t[15][a & 255] ^ t[14][(a >> 8) & 255] ^ t[13][(a >> 16) & 255] ^ t[12][a >> 24] ^
          t[11][b & 255] ^ t[10][(b >> 8) & 255] ^ t[9][(b >> 16) & 255] ^ t[8][b >> 24] ^
          t[7][c & 255] ^ t[6][(c >> 8) & 255] ^ t[5][(c >> 16) & 255] ^ t[4][c >> 24] ^
          t[3][d & 255] ^ t[2][(d >> 8) & 255] ^ t[1][(d >> 16) & 255] ^ t[0][d >> 24];
  }
  for (; n > 0; --n, ++p) crc = t[0][(crc ^ *p) & 255] ^ (crc >> 8);
  return ~crc;
}

}  // namespace

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

uint32_t crc32(const uint8_t* p, size_t n, uint32_t crc) {
#if ACES_FAST_X86_SIMD
  // carry-less multiplication from the AVX2 level on (ACES_FAST_SIMD=none
  // runs the tables): several times their speed
  static const bool fold = simd::level() >= simd::kAvx2;
  if (fold && n >= 64) {
    const size_t whole = n & ~size_t(15);
    crc = ~simd::crc32_fold(p, whole, ~crc);
    p += whole;
    n -= whole;
  }
#endif
  return crc32_tables(p, n, crc);
}

namespace {

constexpr int kHashBits = 14;
constexpr size_t kFragment = size_t(1) << 16;
// The matcher reads 4 bytes ahead of a candidate position and compares 8 at
// a time: the last bytes of a fragment are emitted as a literal.
constexpr size_t kInputMargin = 15;

inline uint32_t hash4(uint32_t v) { return (v * 0x1e35a7bdu) >> (32 - kHashBits); }

void emit_literal(std::string& out, const uint8_t* p, size_t len) {
  const size_t n = len - 1;
  if (n < 60) {
    out.push_back(static_cast<char>(n << 2));
  } else {
    int bytes = n < (1u << 8) ? 1 : n < (1u << 16) ? 2 : n < (1u << 24) ? 3 : 4;
    out.push_back(static_cast<char>((59 + bytes) << 2));
    for (int b = 0; b < bytes; ++b) out.push_back(static_cast<char>((n >> (8 * b)) & 255));
  }
  out.append(reinterpret_cast<const char*>(p), len);
}

// one copy element, 4 <= len <= 64, offset < 65536
void emit_copy_upto64(std::string& out, size_t offset, size_t len) {
  if (len < 12 && offset < 2048) {
    out.push_back(static_cast<char>(1 | ((len - 4) << 2) | ((offset >> 8) << 5)));
    out.push_back(static_cast<char>(offset & 255));
  } else {
    out.push_back(static_cast<char>(2 | ((len - 1) << 2)));
    out.push_back(static_cast<char>(offset & 255));
    out.push_back(static_cast<char>(offset >> 8));
  }
}

void emit_copy(std::string& out, size_t offset, size_t len) {
  // pieces of 64, never leaving fewer than 4 (the smallest copy)
  while (len >= 68) {
    emit_copy_upto64(out, offset, 64);
    len -= 64;
  }
  if (len > 64) {
    emit_copy_upto64(out, offset, 60);
    len -= 60;
  }
  emit_copy_upto64(out, offset, len);
}

size_t match_length(const uint8_t* a, const uint8_t* b, const uint8_t* b_end) {
  size_t k = 0;
  while (b + k + 8 <= b_end) {
    const uint64_t x = load64(a + k) ^ load64(b + k);
    if (x != 0) return k + static_cast<size_t>(portable::ctz64(x) >> 3);
    k += 8;
  }
  while (b + k < b_end && a[k] == b[k]) ++k;
  return k;
}

void compress_fragment(const uint8_t* base, size_t len, uint16_t* table, std::string& out) {
  const uint8_t* ip = base;
  const uint8_t* const end = base + len;
  const uint8_t* next_emit = base;
  if (len >= kInputMargin) {
    std::memset(table, 0, sizeof(uint16_t) << kHashBits);
    const uint8_t* const limit = end - kInputMargin;
    uint32_t next_hash = hash4(load32(++ip));
    for (;;) {
      // find a 4-byte match, looking further apart the longer none is found
      uint32_t skip = 32;
      const uint8_t* next_ip = ip;
      const uint8_t* candidate;
      do {
        ip = next_ip;
        const uint32_t h = next_hash;
        const uint32_t step = skip >> 5;  // grows by itself: 1, ... after 32 misses, then faster
        skip += step;
        next_ip = ip + step;
        if (next_ip > limit) goto remainder;
        next_hash = hash4(load32(next_ip));
        candidate = base + table[h];
        table[h] = static_cast<uint16_t>(ip - base);
      } while (load32(ip) != load32(candidate));
      emit_literal(out, next_emit, static_cast<size_t>(ip - next_emit));
      // copies for as long as the next position matches too
      do {
        const uint8_t* start = ip;
        const size_t matched = 4 + match_length(candidate + 4, ip + 4, end);
        ip += matched;
        emit_copy(out, static_cast<size_t>(start - candidate), matched);
        next_emit = ip;
        if (ip >= limit) goto remainder;
        table[hash4(load32(ip - 1))] = static_cast<uint16_t>(ip - 1 - base);
        const uint32_t h = hash4(load32(ip));
        candidate = base + table[h];
        table[h] = static_cast<uint16_t>(ip - base);
      } while (load32(ip) == load32(candidate));
      next_hash = hash4(load32(++ip));
    }
  }
remainder:
  if (next_emit < end) emit_literal(out, next_emit, static_cast<size_t>(end - next_emit));
}

}  // namespace

void snappy_compress(const uint8_t* data, size_t n, std::string& out) {
  put_varint(out, n);
  out.reserve(out.size() + 32 + n + n / 6);
  std::array<uint16_t, size_t(1) << kHashBits> table;
  for (size_t start = 0; start < n; start += kFragment)
    compress_fragment(data + start, std::min(kFragment, n - start), table.data(), out);
}

}  // namespace aces_fast::io
