// pybind11 bindings of csrc/io/: argument checks (shapes, kinds, the offsets
// within their values), then the work with the GIL released.
#include "bindings/part_bind.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "io/codecs.hpp"
#include "io/parquet_part.hpp"
#include "io/task_ids.hpp"

namespace py = pybind11;

namespace {

using aces_fast::io::ColumnIn;
using aces_fast::io::ColumnKind;

constexpr const char* kFn = "encode_part";

ColumnKind get_kind(const std::string& name, const std::string& kind) {
  if (kind == "string") return ColumnKind::kString;
  if (kind == "bool") return ColumnKind::kBool;
  if (kind == "float64") return ColumnKind::kDouble;
  if (kind == "list<int32>") return ColumnKind::kListInt32;
  if (kind == "list<float64>") return ColumnKind::kListDouble;
  throw py::value_error(std::string(kFn) + ": column '" + name + "': unknown kind '" + kind +
                        "' (string, bool, float64, list<int32> or list<float64>)");
}

// a 1-D C-contiguous array of exactly dtype T (no conversion: the caller hands
// over Arrow buffers as they are)
template <class T>
py::array_t<T> exact(const std::string& col, const char* what, py::handle h, const char* fn = kFn) {
  if (!py::isinstance<py::array_t<T, 0>>(h))
    throw py::type_error(std::string(fn) + ": column '" + col + "': " + what + " must be a " +
                         py::str(py::dtype::of<T>()).cast<std::string>() + " array");
  py::array_t<T> a = py::reinterpret_borrow<py::array_t<T>>(h);
  if (a.ndim() != 1 || !(a.flags() & py::array::c_style))
    throw py::value_error(std::string(fn) + ": column '" + col + "': " + what +
                          " must be 1-D and contiguous");
  return a;
}

// the alignment of encode_part's buffers (a page; O_DIRECT needs the device's
// logical block size, 512 or 4096 bytes)
constexpr size_t kPageBytes = 4096;

// Page-aligned buffers of encoded parts, kept for the next part once their
// array is freed. A fresh buffer of a part's megabytes is mapped anew, and each
// of its 4 KiB pages faults when first written (the kernel zeroes it): on a
// 2-core EPYC VM an 8 192-row part of 100x50 results took 19.5-20.7 ms of CPU
// to encode with fresh buffers, 12.8-13.6 with these. At most kKeptBytes are
// kept.
class PartBuffers {
 public:
  struct Block {
    void* p;
    size_t cap;
  };

  // a buffer of at least `size` bytes: the smallest kept one that fits, else a
  // new one of `size` rounded up to a MiB (so that parts of nearby sizes share)
  Block take(size_t size) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].cap >= size && (best == free_.size() || free_[i].cap < free_[best].cap))
          best = i;
      if (best < free_.size()) {
        const Block b = free_[best];
        free_[best] = free_.back();
        free_.pop_back();
        kept_ -= b.cap;
        return b;
      }
    }
    const size_t cap = (std::max<size_t>(size, 1) + kRound - 1) / kRound * kRound;
    return {::operator new(cap, std::align_val_t(kPageBytes)), cap};
  }

  void give(Block b) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (kept_ + b.cap <= kKeptBytes) {
        free_.push_back(b);
        kept_ += b.cap;
        return;
      }
    }
    ::operator delete(b.p, std::align_val_t(kPageBytes));
  }

 private:
  static constexpr size_t kRound = size_t(1) << 20;
  static constexpr size_t kKeptBytes = size_t(64) << 20;
  std::mutex mu_;
  std::vector<Block> free_;
  size_t kept_ = 0;
};

// never destroyed: an array may be freed after this module's statics, at exit
PartBuffers& part_buffers() {
  static auto* pool = new PartBuffers;
  return *pool;
}

py::array_t<uint8_t> py_encode_part(int64_t rows, const py::list& columns, const py::list& metadata,
                                    const std::string& created_by) {
  if (rows < 1) throw py::value_error(std::string(kFn) + ": rows must be >= 1");
  if (rows >= (int64_t(1) << 31))
    throw py::value_error(std::string(kFn) + ": rows must be below 2**31");
  std::vector<ColumnIn> cols;
  std::vector<py::object> keep;  // the arrays, alive while the GIL is released
  for (py::handle item : columns) {
    const py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    if (!py::isinstance<py::tuple>(item) || t.size() != 5)
      throw py::type_error(std::string(kFn) +
                           ": each column is (name, kind, valid, offsets, values)");
    ColumnIn c;
    c.name = t[0].cast<std::string>();
    c.kind = get_kind(c.name, t[1].cast<std::string>());
    if (!t[2].is_none()) {
      auto v = exact<uint8_t>(c.name, "valid", t[2]);
      if (v.shape(0) != rows)
        throw py::value_error(std::string(kFn) + ": column '" + c.name + "': valid must have " +
                              std::to_string(rows) + " entries");
      c.valid = v.data();
      keep.push_back(v);
    }
    const bool ranged = c.kind == ColumnKind::kString || c.kind == ColumnKind::kListInt32 ||
                        c.kind == ColumnKind::kListDouble;
    int64_t need = rows;  // values read: rows, or up to the last offset
    if (ranged) {
      auto o = exact<int64_t>(c.name, "offsets", t[3]);
      if (o.shape(0) != rows + 1)
        throw py::value_error(std::string(kFn) + ": column '" + c.name + "': offsets must have " +
                              std::to_string(rows + 1) + " entries");
      const int64_t* po = o.data();
      if (po[0] < 0)
        throw py::value_error(std::string(kFn) + ": column '" + c.name +
                              "': offsets must not be negative");
      for (int64_t r = 0; r < rows; ++r)
        if (po[r + 1] < po[r])
          throw py::value_error(std::string(kFn) + ": column '" + c.name +
                                "': offsets must not decrease");
      c.offsets = po;
      need = po[rows];
      keep.push_back(o);
    }
    py::array values;
    switch (c.kind) {
      case ColumnKind::kString:
      case ColumnKind::kBool:
        values = exact<uint8_t>(c.name, "values", t[4]);
        break;
      case ColumnKind::kListInt32:
        values = exact<int32_t>(c.name, "values", t[4]);
        break;
      default:
        values = exact<double>(c.name, "values", t[4]);
    }
    if (values.shape(0) < need)
      throw py::value_error(std::string(kFn) + ": column '" + c.name +
                            "': values must have at least " + std::to_string(need) + " entries");
    c.values = values.data();
    keep.push_back(values);
    cols.push_back(std::move(c));
  }
  std::vector<aces_fast::io::KeyValue> kv;
  for (py::handle item : metadata) {
    const py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    if (!py::isinstance<py::tuple>(item) || t.size() != 2)
      throw py::type_error(std::string(kFn) + ": metadata is a list of (key, value) bytes");
    kv.push_back({t[0].cast<std::string>(), t[1].cast<std::string>()});
  }
  // Encoded into this thread's scratch, kept from call to call (no fresh pages
  // to fault in), then its pieces copied, with the GIL released, into a buffer
  // that starts on a page boundary: the staging write hands such a buffer to
  // the disk past the page cache (O_DIRECT, aces_fast._commit.write_fully),
  // which cost 4-5 ms of system time per 2.4 MB part on a 2-core host against
  // 0.3 ms for this copy. Copying into a bytes object instead held the GIL.
  // The pieces go straight into that buffer: gathering them into one string
  // first copied every part twice.
  static thread_local aces_fast::io::PartPieces part;
  auto* block = new PartBuffers::Block{nullptr, 0};
  size_t size = 0;
  try {
    py::gil_scoped_release release;
    struct Trim {  // also when encoding throws
      ~Trim() { aces_fast::io::trim_part_scratch(); }
    } trim;
    aces_fast::io::encode_part_pieces(rows, cols, kv, created_by, part);
    size = part.size;
    *block = part_buffers().take(size);
    auto* dst = static_cast<char*>(block->p);
    for (std::string_view piece : part.pieces) {
      std::memcpy(dst, piece.data(), piece.size());
      dst += piece.size();
    }
  } catch (...) {
    if (block->p != nullptr) part_buffers().give(*block);
    delete block;
    throw;
  }
  // the buffer goes back to the pool when the array (and every view of it) is freed
  const py::capsule owner(block, [](void* q) {
    auto* b = static_cast<PartBuffers::Block*>(q);
    part_buffers().give(*b);
    delete b;
  });
  py::array_t<uint8_t> data({static_cast<py::ssize_t>(size)}, static_cast<uint8_t*>(block->p),
                            owner);
  py::detail::array_proxy(data.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return data;
}

py::tuple py_repeated_ids(py::handle offsets_h, py::handle data_h, py::handle valid_h,
                          int hash_bits) {
  const std::string col = "task_id";
  const auto offsets = exact<int64_t>(col, "offsets", offsets_h, "repeated_ids");
  const auto data = exact<uint8_t>(col, "data", data_h, "repeated_ids");
  const int64_t rows = static_cast<int64_t>(offsets.shape(0)) - 1;
  if (rows < 0) throw py::value_error("repeated_ids: offsets must have rows + 1 entries");
  const int64_t* po = offsets.data();
  if (po[0] < 0 || po[rows] > static_cast<int64_t>(data.shape(0)))
    throw py::value_error("repeated_ids: offsets must lie within data");
  for (int64_t r = 0; r < rows; ++r)
    if (po[r + 1] < po[r]) throw py::value_error("repeated_ids: offsets must not decrease");
  const uint8_t* pv = nullptr;
  py::array_t<uint8_t> valid;
  if (!valid_h.is_none()) {
    valid = exact<uint8_t>(col, "valid", valid_h, "repeated_ids");
    if (valid.shape(0) != rows)
      throw py::value_error("repeated_ids: valid must have one entry per row");
    pv = valid.data();
  }
  if (hash_bits < 1 || hash_bits > 64)
    throw py::value_error("repeated_ids: hash_bits must be in [1, 64]");
  std::vector<int64_t> dup, first;
  {
    py::gil_scoped_release release;
    aces_fast::io::repeated_ids(rows, po, data.data(), pv, hash_bits, dup, first);
  }
  py::array_t<int64_t> d(static_cast<py::ssize_t>(dup.size()));
  py::array_t<int64_t> f(static_cast<py::ssize_t>(first.size()));
  std::copy(dup.begin(), dup.end(), d.mutable_data());
  std::copy(first.begin(), first.end(), f.mutable_data());
  return py::make_tuple(d, f);
}

std::string buffer_bytes(py::buffer b) {
  const py::buffer_info info = b.request();
  if (info.ndim != 1 || info.itemsize != 1 || info.strides[0] != 1)
    throw py::type_error("expected contiguous bytes");
  return std::string(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size));
}

}  // namespace

void bind_part(py::module_& mod) {
  mod.def("encode_part", &py_encode_part, py::kw_only(), py::arg("rows"), py::arg("columns"),
          py::arg("metadata"), py::arg("created_by"),
          "A results part file's bytes, a read-only uint8 array (csrc/io/parquet_part.hpp):\n"
          "rows >= 1; columns a list\n"
          "of (name, kind, valid uint8 (rows,) or None, offsets int64 (rows + 1,) or None,\n"
          "values); metadata a list of (key, value) bytes. GIL released while encoding.");
  mod.def("repeated_ids", &py_repeated_ids, py::kw_only(), py::arg("offsets"), py::arg("data"),
          py::arg("valid"), py::arg("hash_bits"),
          "(rows, first rows) of the ids repeated from an earlier row (csrc/io/task_ids.hpp):\n"
          "offsets int64 (rows + 1,), data uint8, valid uint8 (rows,) or None; hash_bits in\n"
          "[1, 64] (64 in use; fewer force collisions for tests). GIL released.");
  mod.def(
      "crc32",
      [](py::buffer data, uint32_t crc) {
        const std::string s = buffer_bytes(data);
        return aces_fast::io::crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size(), crc);
      },
      py::kw_only(), py::arg("data"), py::arg("crc"),
      "CRC-32 of bytes continuing from crc (zlib.crc32(data, crc)).");
  mod.def(
      "snappy_compress",
      [](py::buffer data) {
        const std::string s = buffer_bytes(data);
        std::string out;
        aces_fast::io::snappy_compress(reinterpret_cast<const uint8_t*>(s.data()), s.size(), out);
        return py::bytes(out);
      },
      py::kw_only(), py::arg("data"), "Snappy compression of bytes (the raw format).");
}
