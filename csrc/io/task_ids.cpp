#include "io/task_ids.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/bits.hpp"

namespace aces_fast::io {

namespace {

using bits::mix64;

uint64_t hash_bytes(const uint8_t* p, int64_t n) {
  uint64_t h = mix64(static_cast<uint64_t>(n) + 0x9e3779b97f4a7c15ull);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix64(h ^ w);
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, static_cast<size_t>(n - i));
    h = mix64(h ^ w ^ (uint64_t(1) << 63));
  }
  return h;
}

}  // namespace

void repeated_ids(int64_t rows, const int64_t* offsets, const uint8_t* data, const uint8_t* valid,
                  int hash_bits, std::vector<int64_t>& dup, std::vector<int64_t>& first) {
  dup.clear();
  first.clear();
  const uint64_t keep = hash_bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << hash_bits) - 1;
  struct Entry {
    uint64_t hash;
    int64_t row;
  };
  // Ids of equal hash agree on any bits of mix64(hash): the rows are scattered by
  // 10 of them into partitions (in row order), and each partition's table fits
  // in the cache, where one table for all rows missed it on every probe.
  constexpr int kPartBits = 10;
  constexpr size_t kParts = size_t(1) << kPartBits;
  const auto part_of = [](uint64_t h) { return static_cast<size_t>(mix64(h) >> (64 - kPartBits)); };
  std::vector<Entry> entries;
  entries.reserve(static_cast<size_t>(rows));
  std::vector<size_t> start(kParts + 1, 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (valid && !valid[r]) continue;
    const uint64_t h = hash_bytes(data + offsets[r], offsets[r + 1] - offsets[r]) & keep;
    entries.push_back(Entry{h, r});
    ++start[part_of(h) + 1];
  }
  for (size_t q = 0; q < kParts; ++q) start[q + 1] += start[q];
  std::vector<Entry> parted(entries.size());
  {
    std::vector<size_t> at(start.begin(), start.end() - 1);
    for (const Entry& e : entries) parted[at[part_of(e.hash)]++] = e;
  }
  std::vector<Entry>().swap(entries);
  std::vector<std::pair<int64_t, int64_t>> found;  // (row, the first row of its id)
  std::vector<int64_t> slot_row;                   // a partition's table: entry index + 1, 0 empty
  for (size_t q = 0; q < kParts; ++q) {
    const size_t lo = start[q], n = start[q + 1] - lo;
    if (n < 2) continue;
    size_t size = 16;
    while (size < 2 * n) size <<= 1;
    slot_row.assign(size, 0);
    for (size_t i = lo; i < lo + n; ++i) {
      const Entry& e = parted[i];
      const uint8_t* id = data + offsets[e.row];
      const int64_t len = offsets[e.row + 1] - offsets[e.row];
      for (size_t s = e.hash & (size - 1);; s = (s + 1) & (size - 1)) {
        if (slot_row[s] == 0) {  // a new id
          slot_row[s] = static_cast<int64_t>(i) + 1;
          break;
        }
        const Entry& o = parted[static_cast<size_t>(slot_row[s] - 1)];
        if (o.hash == e.hash && offsets[o.row + 1] - offsets[o.row] == len &&
            std::memcmp(data + offsets[o.row], id, static_cast<size_t>(len)) == 0) {
          found.emplace_back(e.row, o.row);  // the slot holds the id's first row
          break;
        }
      }
    }
  }
  // found partition by partition: back to row order
  std::sort(found.begin(), found.end());
  for (const auto& [row, first_row] : found) {
    dup.push_back(row);
    first.push_back(first_row);
  }
}

}  // namespace aces_fast::io
