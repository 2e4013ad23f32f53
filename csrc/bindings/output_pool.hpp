// Memory of the batch calls' flat output arrays, kept for the next call.
//
// A batch writes a few large arrays (rerank_batch_flat: 20 000 tasks of 24x100
// write 40 MB). Each is fresh memory from the system (glibc maps large blocks
// and trims freed ones), so every call pays a page fault and the zeroing of
// every page it writes: 13% of a 24x100 batch on one thread and 22% on two,
// where the faults contend (AMD EPYC, 2 cores). An array made here lives in a
// block of this pool; when the array is freed its block waits here, already
// mapped, for the next call's array of about its size.
//
// Bounds: blocks of at least kMinBytes only (smaller ones come from malloc
// without faults); at most kMaxBlocks blocks and kMaxBytes bytes waiting (what
// a process keeps beyond its live arrays); a block serves a request of at
// least half its size. Every operation holds the GIL (arrays are made and
// freed by Python code), and a mutex besides.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace aces_fast {
namespace bind {

namespace py = pybind11;

namespace output_pool {

constexpr size_t kMinBytes = size_t(1) << 16;
constexpr size_t kMaxBytes = size_t(128) << 20;
constexpr size_t kMaxBlocks = 16;
// A block's size sits in a header before the data (the capsule sees the data).
constexpr size_t kHeader = 64;

struct Pool {
  std::mutex mu;
  std::vector<std::pair<size_t, void*>> blocks;  // (bytes, raw pointer)
  size_t bytes = 0;
};

inline Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: capsules may outlive statics
  return *p;
}

// A raw block of at least `bytes` data bytes (header included before them).
inline void* take(size_t bytes) {
  {
    Pool& p = pool();
    const std::lock_guard<std::mutex> lock(p.mu);
    size_t best = p.blocks.size();
    for (size_t k = 0; k < p.blocks.size(); ++k) {
      const size_t have = p.blocks[k].first;
      if (have >= bytes && have / 2 <= bytes &&
          (best == p.blocks.size() || have < p.blocks[best].first))
        best = k;
    }
    if (best < p.blocks.size()) {
      void* raw = p.blocks[best].second;
      p.bytes -= p.blocks[best].first;
      p.blocks.erase(p.blocks.begin() + static_cast<std::ptrdiff_t>(best));
      return raw;
    }
  }
  void* raw = std::malloc(kHeader + bytes);
  if (raw == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(raw) = bytes;
  return raw;
}

// Back to the pool, or to the system when the pool is full.
inline void give(void* raw) {
  const size_t bytes = *static_cast<size_t*>(raw);
  Pool& p = pool();
  {
    const std::lock_guard<std::mutex> lock(p.mu);
    if (p.blocks.size() < kMaxBlocks && p.bytes + bytes <= kMaxBytes) {
      p.blocks.emplace_back(bytes, raw);
      p.bytes += bytes;
      return;
    }
  }
  std::free(raw);
}

// Bytes waiting in the pool (for tests and show_config).
inline size_t waiting() {
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mu);
  return p.bytes;
}

// Empties the pool (its blocks go back to the system).
inline void clear() {
  Pool& p = pool();
  std::vector<std::pair<size_t, void*>> blocks;
  {
    const std::lock_guard<std::mutex> lock(p.mu);
    blocks.swap(p.blocks);
    p.bytes = 0;
  }
  for (auto& b : blocks) std::free(b.second);
}

}  // namespace output_pool

// A 1-D array of `count` uninitialized T (like py::array_t<T>(count)); from the
// pool when it is large enough to be worth keeping.
template <typename T>
py::array_t<T> pooled_array(py::ssize_t count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  if (bytes < output_pool::kMinBytes) return py::array_t<T>(count);
  void* raw = output_pool::take(bytes);
  py::capsule owner;
  try {
    owner = py::capsule(raw, [](void* r) { output_pool::give(r); });
  } catch (...) {
    output_pool::give(raw);
    throw;
  }
  return py::array_t<T>({count}, {static_cast<py::ssize_t>(sizeof(T))},
                        reinterpret_cast<T*>(static_cast<char*>(raw) + output_pool::kHeader),
                        owner);
}

}  // namespace bind
}  // namespace aces_fast
