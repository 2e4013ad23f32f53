// Byte codecs of the Parquet part writer (io/parquet_part.hpp): varints, the
// page checksum (CRC-32) and Snappy compression. Both produce the formats' bytes
// exactly as zlib's crc32 and any Snappy decompressor read them
// (tests/test_part_writer.py checks them against zlib and pyarrow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aces_fast::io {

// Appends v as a ULEB128 varint (7 bits a byte, low first): Snappy's length
// header, and Thrift's and Parquet's integers.
void put_varint(std::string& out, uint64_t v);

// CRC-32 (ISO-HDLC, the polynomial of zlib and of Parquet's page checksums) of
// n bytes, continuing from crc (0 to start). Slicing by sixteen: O(n).
uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);

// Appends the Snappy compression of n bytes to out (the raw format, as
// Parquet's SNAPPY codec stores it: the uncompressed length, then literal and
// copy elements). Greedy matching on a hash table of 4-byte prefixes, 64 KiB
// fragments at a time, skipping faster through bytes that do not match (as
// Google's compressor does), so incompressible data costs little. O(n).
void snappy_compress(const uint8_t* data, size_t n, std::string& out);

}  // namespace aces_fast::io
