// Repeated task ids of a dataset run's input (aces_fast._input.duplicate_rows):
// which rows name a task an earlier row already named, found in one pass.
#pragma once

#include <cstdint>
#include <vector>

namespace aces_fast::io {

// Rows r (ascending) whose id equals that of an earlier row, with first[k] the
// earliest row of dup[k]'s id. Row r's id is the bytes [offsets[r],
// offsets[r+1]) of data; rows with valid[r] == 0 have none (valid may be
// nullptr: every row has one). Ids are hashed, the rows split by hash into
// partitions small enough for the cache, and each partition's ids go through
// an open-addressing table, compared byte for byte where hashes agree
// (hash_bits < 64 keeps only that many bits, so tests can force collisions).
// O(rows + bytes) time, about 40 bytes per row.
void repeated_ids(int64_t rows, const int64_t* offsets, const uint8_t* data, const uint8_t* valid,
                  int hash_bits, std::vector<int64_t>& dup, std::vector<int64_t>& first);

}  // namespace aces_fast::io
