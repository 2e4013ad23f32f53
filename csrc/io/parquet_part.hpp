// The dataset runs' part files, written without pyarrow: one Parquet file of
// one row group, one data page per column, from the results' flat arrays
// (aces_fast._parts, docs/parquet.md "Part files"). The layout is the one the
// pyarrow writer of aces_fast._parts produces, and pyarrow reads both back to
// the same table:
//
// * every column nullable (OPTIONAL); lists as Parquet's three-level LIST
//   (``name.list.element``, elements OPTIONAL, none null);
// * data pages v1, definition and repetition levels RLE-encoded, Snappy for
//   every page and a CRC-32 of every page (Parquet's page checksum);
// * strings, booleans and doubles PLAIN, with statistics (null count, min,
//   max; NaN never a min or max); int32 lists DELTA_BINARY_PACKED, double
//   lists BYTE_STREAM_SPLIT, without statistics;
// * the caller's key-value metadata (pyarrow's ARROW:schema among them).
//
// Cost: O(bytes) in one pass per column and one for the compression; no
// Python, so the caller releases the GIL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace aces_fast::io {

enum class ColumnKind { kString, kBool, kDouble, kListInt32, kListDouble };

// One column of `rows` rows. valid: one 0/1 byte per row (nullptr: all valid).
// offsets (rows + 1): where row r's bytes (kString) or elements (lists) are,
// [offsets[r], offsets[r+1]) of values; unused for the other kinds. values:
// the bytes (kString), 0/1 bytes (kBool), doubles (kDouble, kListDouble) or
// int32 (kListInt32). A null row's value is never read.
struct ColumnIn {
  std::string name;
  ColumnKind kind;
  const uint8_t* valid = nullptr;
  const int64_t* offsets = nullptr;
  const void* values = nullptr;
};

struct KeyValue {
  std::string key, value;
};

// The whole file's bytes as the pieces that make it up, in order (size: their
// sum), which lie in this thread's scratch: valid until the thread's next
// encode_part_pieces or trim_part_scratch. The caller copies them where the
// file goes (the binding: its page-aligned buffer), so the file is copied
// once. rows >= 1; offsets non-decreasing (checked by the binding).
struct PartPieces {
  std::vector<std::string_view> pieces;
  size_t size = 0;
};
void encode_part_pieces(int64_t rows, const std::vector<ColumnIn>& columns,
                        const std::vector<KeyValue>& metadata, const std::string& created_by,
                        PartPieces& part);

// Frees this thread's scratch if a large part left it above 64 MiB (call once
// the pieces are copied).
void trim_part_scratch();

// DELTA_BINARY_PACKED of n int32 values (blocks of 128, four miniblocks),
// appended to out: the order column's encoding, apart for its tests.
void delta_binary_packed(const int32_t* v, int64_t n, std::string& out);

}  // namespace aces_fast::io
