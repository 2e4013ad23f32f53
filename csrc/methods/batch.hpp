// Many tasks of one method in one call: the OpenMP scheduler behind
// _core.rerank_batch. Plain C++ on caller-owned buffers (no Python): the
// bindings validate, allocate every task's outputs, release the GIL and call
// run_batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "methods/methods.hpp"

namespace aces_fast {

// One task: its pass matrix (row-major bytes, n >= 1 rows, m >= 0 columns,
// n < 2^31) and its caller-allocated outputs (sized as run_method requires).
// With `packed` set, the matrix is instead n rows of ceil(m / 8) bytes packed
// big-endian (docs/parquet.md's B column), turned into packed words (and,
// unless runs_from_words, unpacked into bytes) in the running thread's
// workspace just before the task runs, so a batch never holds its unpacked
// matrices all at once.
struct BatchTask {
  const uint8_t* B = nullptr;
  const uint8_t* packed = nullptr;
  int64_t n = 0;
  int64_t m = 0;
  MethodOutput out;
  bool bad_padding = false;  // set: `packed` has a padding bit set; nothing computed
  std::string error;         // set by run_batch when this task failed
};

// Runs run_method(p) on every task. With more than one task and more than one
// thread: largest tasks first (by cells) on a dynamic schedule, one task per
// thread at a time (each single-threaded), one workspace per thread; a lone
// task (or n_threads resolving to 1) runs the tasks in order, each with the
// threads itself. Results do not depend on the schedule (run_method's are
// thread-count independent). A failing task records its message in
// tasks[k].error and the others still run; returns true when some task ran out
// of memory (its error is then "out of memory"). Never throws from inside the
// parallel region.
bool run_batch(BatchTask* tasks, size_t count, const MethodParams& p, int n_threads);

}  // namespace aces_fast
