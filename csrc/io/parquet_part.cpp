#include "io/parquet_part.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "io/codecs.hpp"
#include "portable.hpp"

namespace aces_fast::io {

namespace {

// --- Thrift's compact protocol (the encoding of Parquet's metadata) ----------

enum : uint8_t { kI16 = 4, kI32 = 5, kI64 = 6, kBinary = 8 };
enum : uint8_t { kList = 9, kStruct = 12 };

uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

class Thrift {
 public:
  explicit Thrift(std::string& out) : out_(out) {}

  void i32(int16_t id, int64_t v) { int_field(id, kI32, v); }
  void i64(int16_t id, int64_t v) { int_field(id, kI64, v); }
  void i16(int16_t id, int64_t v) { int_field(id, kI16, v); }
  void binary(int16_t id, std::string_view s) {
    header(id, kBinary);
    raw_binary(s);
  }
  // a struct field: its fields follow, then end()
  void begin(int16_t id) {
    header(id, kStruct);
    open();
  }
  // a struct of a list (or the outermost one): its fields follow, then end()
  void open() {
    stack_.push_back(last_);
    last_ = 0;
  }
  void end() {
    out_.push_back(0);
    last_ = stack_.back();
    stack_.pop_back();
  }
  void list(int16_t id, uint8_t element_type, size_t size) {
    header(id, kList);
    if (size < 15) {
      out_.push_back(static_cast<char>((size << 4) | element_type));
    } else {
      out_.push_back(static_cast<char>(0xF0 | element_type));
      put_varint(out_, size);
    }
  }
  // list elements
  void raw_i32(int64_t v) { put_varint(out_, zigzag(v)); }
  void raw_binary(std::string_view s) {
    put_varint(out_, s.size());
    out_.append(s.data(), s.size());
  }

 private:
  void header(int16_t id, uint8_t type) {
    const int delta = id - last_;
    if (delta > 0 && delta <= 15) {
      out_.push_back(static_cast<char>((delta << 4) | type));
    } else {
      out_.push_back(static_cast<char>(type));
      put_varint(out_, zigzag(id));
    }
    last_ = id;
  }
  void int_field(int16_t id, uint8_t type, int64_t v) {
    header(id, type);
    put_varint(out_, zigzag(v));
  }
  std::string& out_;
  int16_t last_ = 0;
  std::vector<int16_t> stack_;
};

// Parquet's enums (parquet.thrift)
enum PhysicalType : int { kBoolean = 0, kInt32 = 1, kDouble = 5, kByteArray = 6 };
enum Repetition : int { kOptional = 1, kRepeated = 2 };
enum Encoding : int { kPlain = 0, kRle = 3, kDeltaBinaryPacked = 5, kByteStreamSplit = 9 };
enum Converted : int { kUtf8 = 0, kListConverted = 3 };
constexpr int kSnappy = 1;
constexpr int kDataPage = 0;

bool is_list(ColumnKind k) { return k == ColumnKind::kListInt32 || k == ColumnKind::kListDouble; }

int physical(ColumnKind k) {
  switch (k) {
    case ColumnKind::kString:
      return kByteArray;
    case ColumnKind::kBool:
      return kBoolean;
    case ColumnKind::kListInt32:
      return kInt32;
    default:
      return kDouble;
  }
}

int value_encoding(ColumnKind k) {
  if (k == ColumnKind::kListInt32) return kDeltaBinaryPacked;
  if (k == ColumnKind::kListDouble) return kByteStreamSplit;
  return kPlain;
}

// --- levels: the RLE runs of the RLE / bit-packed hybrid (values of 1 byte) --

class Levels {
 public:
  void put(uint8_t v, uint64_t n) {
    if (n == 0) return;
    if (n_ > 0 && v == v_) {
      n_ += n;
      return;
    }
    flush();
    v_ = v;
    n_ = n;
  }
  // the levels with their 4-byte length (data page v1), appended to out
  void append_to(std::string& out) {
    flush();
    const uint32_t len = static_cast<uint32_t>(runs_.size());
    char b[4];
    std::memcpy(b, &len, 4);
    out.append(b, 4);
    out += runs_;
  }

 private:
  void flush() {
    if (n_ == 0) return;
    put_varint(runs_, n_ << 1);
    runs_.push_back(static_cast<char>(v_));
    n_ = 0;
  }
  std::string runs_;
  uint8_t v_ = 0;
  uint64_t n_ = 0;
};

// --- statistics of the scalar columns -----------------------------------------

struct Stats {
  int64_t nulls = 0;
  bool has = false;
  std::string min, max;
};

template <class T>
std::string bytes_of(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

// signed_order: also the deprecated min / max fields (readers from before
// min_value / max_value read those; they were defined with a signed byte
// order, so pyarrow, as here, writes them for numbers and booleans only)
void write_stats(Thrift& t, const Stats& s, bool signed_order) {
  t.begin(12);
  if (s.has && signed_order) {
    t.binary(1, s.max);
    t.binary(2, s.min);
  }
  t.i64(3, s.nulls);
  if (s.has) {
    t.binary(5, s.max);
    t.binary(6, s.min);
  }
  t.end();
}

// --- one column chunk -----------------------------------------------------------

struct Chunk {
  std::string_view bytes;    // page header and compressed page, in the scratch (the chunk)
  int64_t offset = 0;        // in the file
  int64_t num_values = 0;    // level entries: rows, or list elements plus null and empty lists
  int64_t uncompressed = 0;  // page header + uncompressed page
  Stats stats;
};

// Buffers reused from call to call on the same thread: a part's pages are
// megabytes, and fresh buffers of that size cost page faults (the kernel
// zeroes every page) that would take as long as the encoding itself. At most
// kKeepBytes stay after trim_part_scratch. pages[i]: column i's page header and
// compressed page, the piece of the file encode_part_pieces hands out.
constexpr size_t kKeepBytes = size_t(64) << 20;
struct Scratch {
  std::string body, head, footer;
  std::vector<std::string> pages;  // a column's page header and compressed page each
  std::vector<int32_t> ints;
  std::vector<double> doubles;
  size_t bytes() const {
    size_t n = body.capacity() + footer.capacity();
    for (const std::string& p : pages) n += p.capacity();
    return n;
  }
};

void byte_stream_split(const double* v, int64_t n, std::string& out) {
  const size_t at = out.size();
  out.resize(at + 8 * static_cast<size_t>(n));
  char* dst = out.data() + at;
  const unsigned char* src = reinterpret_cast<const unsigned char*>(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // eight values at once: an 8 x 8 byte transpose in three rounds of block
    // swaps (4-, 2-, then 1-byte blocks), after which x[k] holds byte k of the
    // eight values, the next 8 bytes of stream k
    uint64_t x[8];
    std::memcpy(x, src + 8 * i, 64);
    for (int a = 0; a < 4; ++a) {
      const uint64_t t = ((x[a] >> 32) ^ x[a + 4]) & 0x00000000FFFFFFFFull;
      x[a] ^= t << 32;
      x[a + 4] ^= t;
    }
    for (int a : {0, 1, 4, 5}) {
      const uint64_t t = ((x[a] >> 16) ^ x[a + 2]) & 0x0000FFFF0000FFFFull;
      x[a] ^= t << 16;
      x[a + 2] ^= t;
    }
    for (int a : {0, 2, 4, 6}) {
      const uint64_t t = ((x[a] >> 8) ^ x[a + 1]) & 0x00FF00FF00FF00FFull;
      x[a] ^= t << 8;
      x[a + 1] ^= t;
    }
    for (int64_t k = 0; k < 8; ++k) std::memcpy(dst + k * n + i, &x[k], 8);
  }
  for (; i < n; ++i)
    for (int64_t k = 0; k < 8; ++k) dst[k * n + i] = static_cast<char>(src[8 * i + k]);
}

// values of the valid rows of a list column: a pointer into values when they
// are one range, else gathered into buf
template <class T>
const T* list_values(const ColumnIn& c, int64_t rows, std::vector<T>& buf, int64_t& count) {
  const T* v = static_cast<const T*>(c.values);
  const int64_t* off = c.offsets;
  bool whole = true;
  if (c.valid)
    for (int64_t r = 0; r < rows; ++r) whole &= c.valid[r] || off[r] == off[r + 1];
  if (whole) {
    count = off[rows] - off[0];
    return v + off[0];
  }
  buf.clear();
  for (int64_t r = 0; r < rows; ++r)
    if (c.valid[r]) buf.insert(buf.end(), v + off[r], v + off[r + 1]);
  count = static_cast<int64_t>(buf.size());
  return buf.data();
}

// the column's page, uncompressed, into body; its statistics into ch
void page_body(const ColumnIn& c, int64_t rows, Chunk& ch, Scratch& sc) {
  std::string& body = sc.body;
  body.clear();
  Levels def;
  if (is_list(c.kind)) {
    Levels rep;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t len = c.offsets[r + 1] - c.offsets[r];
      if (c.valid && !c.valid[r]) {
        rep.put(0, 1);
        def.put(0, 1);
        ch.num_values += 1;
      } else if (len == 0) {
        rep.put(0, 1);
        def.put(1, 1);
        ch.num_values += 1;
      } else {
        rep.put(0, 1);
        rep.put(1, static_cast<uint64_t>(len - 1));
        def.put(3, static_cast<uint64_t>(len));
        ch.num_values += len;
      }
    }
    rep.append_to(body);
    def.append_to(body);
    int64_t count = 0;
    if (c.kind == ColumnKind::kListInt32) {
      const int32_t* v = list_values<int32_t>(c, rows, sc.ints, count);
      delta_binary_packed(v, count, body);
    } else {
      const double* v = list_values<double>(c, rows, sc.doubles, count);
      byte_stream_split(v, count, body);
    }
    return;
  }
  ch.num_values = rows;
  Stats& st = ch.stats;
  for (int64_t r = 0; r < rows; ++r) {
    const bool ok = !c.valid || c.valid[r];
    def.put(ok ? 1 : 0, 1);
    st.nulls += !ok;
  }
  def.append_to(body);
  if (c.kind == ColumnKind::kString) {
    const char* data = static_cast<const char*>(c.values);
    std::string_view lo, hi;
    for (int64_t r = 0; r < rows; ++r) {
      if (c.valid && !c.valid[r]) continue;
      const std::string_view s(data + c.offsets[r],
                               static_cast<size_t>(c.offsets[r + 1] - c.offsets[r]));
      const uint32_t len = static_cast<uint32_t>(s.size());
      char b[4];
      std::memcpy(b, &len, 4);
      body.append(b, 4);
      body.append(s.data(), s.size());
      // string_view compares as unsigned bytes (char_traits<char>::compare)
      if (!st.has || s < lo) lo = s;
      if (!st.has || s > hi) hi = s;
      st.has = true;
    }
    st.min.assign(lo.data(), lo.size());
    st.max.assign(hi.data(), hi.size());
  } else if (c.kind == ColumnKind::kBool) {
    const uint8_t* v = static_cast<const uint8_t*>(c.values);
    uint8_t byte = 0;
    int bits = 0;
    bool any_true = false, any_false = false;
    for (int64_t r = 0; r < rows; ++r) {
      if (c.valid && !c.valid[r]) continue;
      const bool x = v[r] != 0;
      any_true |= x;
      any_false |= !x;
      byte |= static_cast<uint8_t>(x) << bits;
      if (++bits == 8) {
        body.push_back(static_cast<char>(byte));
        byte = 0;
        bits = 0;
      }
    }
    if (bits) body.push_back(static_cast<char>(byte));
    if (any_true || any_false) {
      st.has = true;
      st.min = std::string(1, any_false ? '\0' : '\1');
      st.max = std::string(1, any_true ? '\1' : '\0');
    }
  } else {
    const double* v = static_cast<const double*>(c.values);
    double lo = 0, hi = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (c.valid && !c.valid[r]) continue;
      body += bytes_of(v[r]);
      if (std::isnan(v[r])) continue;
      if (!st.has || v[r] < lo) lo = v[r];
      if (!st.has || v[r] > hi) hi = v[r];
      st.has = true;
    }
    // Parquet's rule for signed zeros: a zero min is written -0.0, a zero max +0.0
    if (lo == 0) lo = -0.0;
    if (hi == 0) hi = 0.0;
    st.min = bytes_of(lo);
    st.max = bytes_of(hi);
  }
}

// the column chunk (page header, then compressed page) into out, which starts
// at `offset` in the file
Chunk write_column(const ColumnIn& c, int64_t rows, int64_t offset, std::string& out, Scratch& sc) {
  Chunk ch;
  page_body(c, rows, ch, sc);
  // The page is compressed after room for its header, which is written into
  // the end of that room once the page's size and checksum are known: the
  // page's megabytes are not moved. A header is at most about 40 bytes (seven
  // integers of at most 5 bytes, field and struct markers).
  constexpr size_t kHeadRoom = 64;
  out.clear();
  out.resize(kHeadRoom);
  snappy_compress(reinterpret_cast<const uint8_t*>(sc.body.data()), sc.body.size(), out);
  const size_t page = out.size() - kHeadRoom;
  // a page's sizes are int32 in its header (the caller keeps pages far smaller)
  if (sc.body.size() > INT32_MAX || page > INT32_MAX)
    throw std::length_error("encode_part: column '" + c.name + "' exceeds a page's 2 GiB");
  sc.head.clear();
  Thrift t(sc.head);
  t.open();
  t.i32(1, kDataPage);
  t.i32(2, static_cast<int64_t>(sc.body.size()));
  t.i32(3, static_cast<int64_t>(page));
  t.i32(4, static_cast<int32_t>(
               crc32(reinterpret_cast<const uint8_t*>(out.data()) + kHeadRoom, page)));
  t.begin(5);
  t.i32(1, ch.num_values);
  t.i32(2, value_encoding(c.kind));
  t.i32(3, kRle);
  t.i32(4, kRle);
  t.end();
  t.end();
  if (sc.head.size() > kHeadRoom)
    throw std::logic_error("encode_part: a page header outgrew its room");
  const size_t skip = kHeadRoom - sc.head.size();
  std::memcpy(out.data() + skip, sc.head.data(), sc.head.size());  // the header's place
  ch.bytes = std::string_view(out).substr(skip);
  ch.offset = offset;
  ch.uncompressed = static_cast<int64_t>(sc.head.size() + sc.body.size());
  return ch;
}

void schema_leaf(Thrift& t, int type, const std::string& name, int converted, int logical) {
  t.open();
  t.i32(1, type);
  t.i32(3, kOptional);
  t.binary(4, name);
  if (converted >= 0) t.i32(6, converted);
  if (logical > 0) {  // LogicalType, a union of empty structs: STRING = 1, LIST = 3
    t.begin(10);
    t.begin(static_cast<int16_t>(logical));
    t.end();
    t.end();
  }
  t.end();
}

}  // namespace

void delta_binary_packed(const int32_t* v, int64_t n, std::string& out) {
  constexpr int kBlock = 128, kMini = 4, kPer = kBlock / kMini;
  put_varint(out, kBlock);
  put_varint(out, kMini);
  put_varint(out, static_cast<uint64_t>(n));
  put_varint(out, zigzag(n > 0 ? v[0] : 0));
  uint32_t d[kBlock];
  for (int64_t start = 1; start < n; start += kBlock) {
    const int count = static_cast<int>(std::min<int64_t>(kBlock, n - start));
    // INT32 deltas wrap around in 32 bits, as Parquet's readers add them back
    int32_t min_delta = 0;
    for (int i = 0; i < count; ++i) {
      const int32_t delta = static_cast<int32_t>(static_cast<uint32_t>(v[start + i]) -
                                                 static_cast<uint32_t>(v[start + i - 1]));
      d[i] = static_cast<uint32_t>(delta);
      if (i == 0 || delta < min_delta) min_delta = delta;
    }
    put_varint(out, zigzag(min_delta));
    uint8_t width[kMini] = {0, 0, 0, 0};
    for (int mb = 0; mb * kPer < count; ++mb) {
      uint32_t any = 0;  // the widest value's bits
      for (int i = mb * kPer; i < std::min(count, (mb + 1) * kPer); ++i) {
        d[i] -= static_cast<uint32_t>(min_delta);
        any |= d[i];
      }
      width[mb] = static_cast<uint8_t>(any == 0 ? 0 : 64 - portable::clz64(any));
    }
    out.append(reinterpret_cast<const char*>(width), kMini);
    // each miniblock with values: 32 values of its width, LSB first, in 4 * width bytes
    for (int mb = 0; mb * kPer < count; ++mb) {
      const int w = width[mb];
      const size_t at = out.size();
      out.resize(at + 4 * static_cast<size_t>(w));
      char* dst = out.data() + at;
      uint64_t acc = 0;
      int bits = 0;
      for (int i = mb * kPer; i < (mb + 1) * kPer; ++i) {
        acc |= static_cast<uint64_t>(i < count ? d[i] : 0) << bits;
        bits += w;
        if (bits >= 32) {
          const uint32_t word = static_cast<uint32_t>(acc);
          std::memcpy(dst, &word, 4);
          dst += 4;
          acc >>= 32;
          bits -= 32;
        }
      }
    }
  }
}

namespace {
thread_local Scratch part_scratch;
}  // namespace

void trim_part_scratch() {
  if (part_scratch.bytes() > kKeepBytes) part_scratch = Scratch();
}

void encode_part_pieces(int64_t rows, const std::vector<ColumnIn>& columns,
                        const std::vector<KeyValue>& metadata, const std::string& created_by,
                        PartPieces& part) {
  Scratch& sc = part_scratch;
  part.pieces.clear();
  part.size = 0;
  const auto add = [&part](std::string_view piece) {
    part.pieces.push_back(piece);
    part.size += piece.size();
  };
  add("PAR1");
  if (sc.pages.size() < columns.size()) sc.pages.resize(columns.size());
  std::vector<Chunk> chunks;
  chunks.reserve(columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    chunks.push_back(
        write_column(columns[i], rows, static_cast<int64_t>(part.size), sc.pages[i], sc));
    add(chunks.back().bytes);
  }
  std::string& file = sc.footer;  // the footer, its length and the magic
  file.clear();
  Thrift t(file);
  t.open();
  t.i32(1, 2);
  // the schema, depth first: the root, then each column (a list: three elements)
  size_t elements = 1;
  for (const ColumnIn& c : columns) elements += is_list(c.kind) ? 3 : 1;
  t.list(2, kStruct, elements);
  t.open();
  t.binary(4, "schema");
  t.i32(5, static_cast<int64_t>(columns.size()));
  t.end();
  for (const ColumnIn& c : columns) {
    if (!is_list(c.kind)) {
      const bool str = c.kind == ColumnKind::kString;
      schema_leaf(t, physical(c.kind), c.name, str ? kUtf8 : -1, str ? 1 : 0);
      continue;
    }
    t.open();
    t.i32(3, kOptional);
    t.binary(4, c.name);
    t.i32(5, 1);
    t.i32(6, kListConverted);
    t.begin(10);
    t.begin(3);
    t.end();
    t.end();
    t.end();
    t.open();
    t.i32(3, kRepeated);
    t.binary(4, "list");
    t.i32(5, 1);
    t.end();
    schema_leaf(t, physical(c.kind), "element", -1, 0);
  }
  t.i64(3, rows);
  int64_t total_uncompressed = 0, total_compressed = 0;
  for (const Chunk& ch : chunks) {
    total_uncompressed += ch.uncompressed;
    total_compressed += static_cast<int64_t>(ch.bytes.size());
  }
  t.list(4, kStruct, 1);
  t.open();
  t.list(1, kStruct, columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    const ColumnIn& c = columns[i];
    const Chunk& ch = chunks[i];
    t.open();
    t.i64(2, ch.offset);
    t.begin(3);
    t.i32(1, physical(c.kind));
    t.list(2, kI32, 2);
    t.raw_i32(value_encoding(c.kind));
    t.raw_i32(kRle);
    const bool list = is_list(c.kind);
    t.list(3, kBinary, list ? 3 : 1);
    t.raw_binary(c.name);
    if (list) {
      t.raw_binary("list");
      t.raw_binary("element");
    }
    t.i32(4, kSnappy);
    t.i64(5, ch.num_values);
    t.i64(6, ch.uncompressed);
    t.i64(7, static_cast<int64_t>(ch.bytes.size()));
    t.i64(9, ch.offset);
    if (!list) write_stats(t, ch.stats, c.kind != ColumnKind::kString);
    t.end();
    t.end();
  }
  t.i64(2, total_uncompressed);
  t.i64(3, rows);
  t.i64(5, chunks.empty() ? 4 : chunks[0].offset);
  t.i64(6, total_compressed);
  t.i16(7, 0);
  t.end();
  if (!metadata.empty()) {
    t.list(5, kStruct, metadata.size());
    for (const KeyValue& kv : metadata) {
      t.open();
      t.binary(1, kv.key);
      t.binary(2, kv.value);
      t.end();
    }
  }
  t.binary(6, created_by);
  // column orders: the type's own order for every leaf (readers then trust
  // min_value / max_value)
  t.list(7, kStruct, columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    t.open();
    t.begin(1);
    t.end();
    t.end();
  }
  t.end();
  const uint32_t len = static_cast<uint32_t>(file.size());
  char b[4];
  std::memcpy(b, &len, 4);
  file.append(b, 4);
  file += "PAR1";
  add(file);
}

}  // namespace aces_fast::io
