// The batch scheduler (see batch.hpp).
#include "methods/batch.hpp"

#include <algorithm>
#include <exception>
#include <new>
#include <numeric>
#include <vector>

#include "kernels/kernels.hpp"

namespace aces_fast {

namespace {

// One task, its failure recorded instead of thrown (an exception must not leave
// an OpenMP region). Returns true when it ran out of memory.
bool run_one(BatchTask& t, const MethodParams& p, MethodWorkspace& ws, bool parallel,
             int n_threads) {
  try {
    run_method(t.B, t.n, t.m, p, t.out, ws, parallel, n_threads);
  } catch (const std::bad_alloc&) {
    t.error = "out of memory";
    return true;
  } catch (const std::exception& e) {
    t.error = e.what();
  }
  return false;
}

}  // namespace

bool run_batch(BatchTask* tasks, size_t count, const MethodParams& p, int n_threads) {
  const int nt = resolve_threads(true, n_threads);
  bool oom = false;
  if (count <= 1 || nt <= 1) {
    MethodWorkspace ws;
    for (size_t k = 0; k < count; ++k) oom = run_one(tasks[k], p, ws, true, n_threads) || oom;
    return oom;
  }
  // Largest tasks first (by cells) so the dynamic schedule ends balanced.
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [tasks](size_t a, size_t b) {
    return tasks[a].n * std::max<int64_t>(tasks[a].m, 1) >
           tasks[b].n * std::max<int64_t>(tasks[b].m, 1);
  });
  const int team = static_cast<int>(std::min<size_t>(static_cast<size_t>(nt), count));
#ifdef _OPENMP
#pragma omp parallel num_threads(team)
#endif
  {
    MethodWorkspace ws;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t q = 0; q < static_cast<int64_t>(count); ++q) {
      if (run_one(tasks[order[static_cast<size_t>(q)]], p, ws, false, 1)) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
        oom = true;
      }
    }
  }
  (void)team;
  return oom;
}

}  // namespace aces_fast
