// Prefetching a batch's next task while the current one computes (internal
// header).
//
// Why: a batch's matrices come from memory, not cache (2 000 tasks of 200x500
// bytes are 200 MB), and a task reads its matrix once, in its first pass (the
// packing); the rest of the task computes on the packed rows, and meanwhile the
// core's memory bandwidth sits idle. The batch driver (methods/batch.cpp) names
// the next task's input as the calling thread's Lines; the loops that run after
// a task's packing (the dedup probes, the uniform LOO-AUC's levels, the nibble
// tables and row scores, the sort's groups) each bring a line or two of it into
// L2 per iteration, so that the next task's packing reads from cache. One
// burst of prefetches would not do: a core keeps only so many misses in flight
// (its fill buffers), so a burst waits for memory as long as the packing would
// have; spread over the computation, the misses overlap it.
//
// Prefetching changes no result (the kernels compute the same bits with or
// without it); a kernel called outside a batch, or after the next task's lines
// are all requested, finds no pending Lines and skips it.
#pragma once

#include <cstdint>

#include "kernels/thread_slot.hpp"
#include "portable.hpp"

namespace aces_fast {
namespace ahead {

// The cache lines of a byte range still to prefetch.
struct Lines {
  uintptr_t line = 0;  // the next line to prefetch (64-byte aligned)
  uintptr_t end = 0;   // one past the range's last byte

  void set(const uint8_t* p, int64_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    line = a & ~uintptr_t(63);
    end = bytes > 0 ? a + static_cast<uintptr_t>(bytes) : line;
  }
  void clear() { line = end = 0; }
  // Prefetches the next k lines, as many as are left.
  void tick(int k) {
    for (int u = 0; u < k && line < end; ++u, line += 64)
      portable::prefetch_l2(reinterpret_cast<const void*>(line));
  }
};

// The calling thread's Lines when it has lines left, else null (also outside a
// batch's Scope): a kernel reads it once, on entry, so that once a small next
// task is prefetched the kernels after it run their loops without the ticks'
// checks.
inline Lines* pending() {
  Lines* const lines = thread_slot<Lines>();
  return lines != nullptr && lines->line < lines->end ? lines : nullptr;
}

// Installs lines as the calling thread's for the scope's lifetime.
using Scope = ThreadScope<Lines>;

}  // namespace ahead
}  // namespace aces_fast
