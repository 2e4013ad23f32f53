// The batch scheduler (see batch.hpp).
#include "methods/batch.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <new>
#include <numeric>
#include <vector>

#include "kernels/ahead.hpp"
#include "kernels/bits.hpp"
#include "kernels/interrupt.hpp"
#include "kernels/kernels.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace aces_fast {

namespace {

// Largest input (bytes) prefetched while the task before it runs: a quarter of
// a typical L2, so that it stays there until its task starts. Small inputs are
// prefetched too: the hardware prefetcher stops at each 4 KiB page and learns
// the next one from its misses, which a 2.4 kB 24x100 task meets every other
// task (paired runs on an Intel host: 24x100 and 100x50 batches 3-7% faster,
// though the ticks cost about 2% of a 24x100 task's instructions).
constexpr int64_t kAheadBytes = int64_t(1) << 19;

// One task, its failure recorded instead of thrown (an exception must not leave
// an OpenMP region). Returns true when it ran out of memory.
bool run_one(BatchTask& t, const MethodParams& p, MethodWorkspace& ws, bool parallel,
             int n_threads) {
  try {
    const uint8_t* B = t.B;
    if (t.packed != nullptr) {
      // The packed words for the kernels that read them (they would otherwise
      // pack the bytes again), and the bytes only for a method that reads them.
      const int64_t nb = (t.m + 7) / 8, nw = (t.m + 63) / 64;
      const bool bytes = !runs_from_words(p, t.n);
      ws.plan.words.resize(static_cast<size_t>(t.n * nw));  // every word is written
      uint64_t* words = ws.plan.words.data();
      bool clean = true;
      if (bytes) {
        ws.unpacked.resize(static_cast<size_t>(t.n * t.m));
        uint8_t* dst = ws.unpacked.data();
        for (int64_t i = 0; i < t.n; ++i) {
          const uint8_t* row = t.packed + i * nb;
          clean = bits::unpack_row_msb(row, t.m, dst + i * t.m) && clean;
          bits::words_of_row_msb(row, nb, words + i * nw);
        }
        B = dst;
      } else {
        // padding bits land above column m in a row's last word
        const int pad = static_cast<int>(t.m % 64);
        clean = bits::words_of_rows_msb(t.packed, t.n, nb, words, pad) == 0;
        B = nullptr;
      }
      if (!clean) {
        t.bad_padding = true;
        return false;
      }
    }
    run_method(B, t.n, t.m, p, t.out, ws, parallel, n_threads, t.packed != nullptr);
    if (t.packed != nullptr && t.n >= kReleaseRows) std::vector<uint8_t>().swap(ws.unpacked);
  } catch (const std::bad_alloc&) {
    t.error = "out of memory";
    return true;
  } catch (const std::exception& e) {
    t.error = e.what();
  }
  return false;
}

// The bytes a task reads first (its matrix, packed or not) and their size.
int64_t input_bytes(const BatchTask& t) {
  return t.packed != nullptr ? t.n * ((t.m + 7) / 8) : t.n * t.m;
}
const uint8_t* input_of(const BatchTask& t) { return t.packed != nullptr ? t.packed : t.B; }

// Tasks a thread claims at a time after running t (the tasks after t in the
// batch's order are no larger): about kClaimCells cells' worth, at most
// kMaxClaim. One claim per task cost a shared counter's cache line moving
// between the cores per task (a fraction of a microsecond, next to 24x100 tasks
// of about 2 us), and neighbouring tasks on different threads write the same
// cache lines of the outputs.
constexpr int64_t kClaimCells = int64_t(1) << 15;
constexpr size_t kMaxClaim = 16;
size_t claims_for(const BatchTask& t) {
  const int64_t cells = t.n * std::max<int64_t>(t.m, 1);
  return static_cast<size_t>(std::clamp<int64_t>(kClaimCells / std::max<int64_t>(cells, 1), 1,
                                                 static_cast<int64_t>(kMaxClaim)));
}

// Names the next task's input as the lines to prefetch while this one runs
// (kernels/ahead.hpp), when it is small enough to stay in cache until its turn.
void look_ahead(ahead::Lines& lines, const BatchTask* next) {
  const int64_t bytes = next != nullptr ? input_bytes(*next) : 0;
  if (bytes == 0 || bytes > kAheadBytes)
    lines.clear();
  else
    lines.set(input_of(*next), bytes);
}

}  // namespace

bool run_batch(BatchTask* tasks, size_t count, const MethodParams& p, int n_threads) {
  // The team is made once for the whole batch: its work is every task's cells,
  // each ACES-O task's once per Adam step.
  const double per_cell = p.method == kMethodAcesO ? static_cast<double>(p.steps) + 1.0 : 1.0;
  double work = 0.0;  // a double: cells times steps may exceed int64
  for (size_t k = 0; k < count; ++k)
    work += static_cast<double>(tasks[k].n) * static_cast<double>(std::max<int64_t>(tasks[k].m, 1));
  work = std::min(work * per_cell, 1e18);
  const int nt = count <= 1 ? 1 : threads_for_work(static_cast<int64_t>(work), n_threads);
  bool oom = false;
  if (count <= 1 || nt <= 1) {
    MethodWorkspace ws;
    ws.sort.batch = count > 1;
    ahead::Lines lines;
    const ahead::Scope pf(&lines);
    for (size_t k = 0; k < count && !interrupt::poll(); ++k) {
      look_ahead(lines, k + 1 < count ? &tasks[k + 1] : nullptr);
      oom = run_one(tasks[k], p, ws, true, n_threads) || oom;
    }
    return oom;
  }
#ifdef _OPENMP
  // Largest tasks first (by cells) so the dynamic schedule ends balanced.
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [tasks](size_t a, size_t b) {
    return tasks[a].n * std::max<int64_t>(tasks[a].m, 1) >
           tasks[b].n * std::max<int64_t>(tasks[b].m, 1);
  });
  const int team = static_cast<int>(std::min<size_t>(static_cast<size_t>(nt), count));
  // The calling thread's interrupt token serves every thread of the team; the
  // caller, once out of tasks, keeps polling it (it alone can see a signal)
  // until the others have finished theirs, woken as each one finishes.
  interrupt::Token* const tok = interrupt::current();
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  // set by any thread (std::atomic, not `omp atomic write`: that is OpenMP 3.1,
  // MSVC's /openmp is 2.0)
  std::atomic<bool> any_oom{false};
  std::atomic<size_t> next{0};  // the first task no thread has claimed
#pragma omp parallel num_threads(team)
  {
    const interrupt::Scope scope(tok);
    {
      MethodWorkspace ws;
      ws.sort.batch = true;  // count > 1 here
      ahead::Lines lines;
      const ahead::Scope pf(&lines);
      // A dynamic schedule over `order`: a thread claims a range of tasks at a
      // time, one large task or several small ones (claims_for), and a thread
      // whose task is small claims its next range before running the range's
      // last task, so that the next task's input can be prefetched meanwhile (a
      // large task gains nothing from it, and holding one back could unbalance
      // the end of the batch). Ranges of small tasks also keep neighbouring
      // tasks' outputs, which share cache lines, on one thread.
      // [q, end): the range being run; [after, after_end): the next one, once
      // claimed (an empty range past the batch's end when none is left)
      size_t after = 0, after_end = 0;
      auto claim = [&](size_t k) {
        after = next.fetch_add(k, std::memory_order_relaxed);
        after_end = std::min(after + k, count);
      };
      claim(1);
      size_t q = after, end = after_end;
      while (q < end) {
        BatchTask& t = tasks[order[q]];
        const bool last = q + 1 == end, small = input_bytes(t) <= kAheadBytes;
        if (last && small) claim(claims_for(t));
        if (!last)
          look_ahead(lines, &tasks[order[q + 1]]);
        else
          look_ahead(lines, small && after < after_end ? &tasks[order[after]] : nullptr);
        // cancelled: skip the rest
        if (!(tok != nullptr && tok->poll()) && run_one(t, p, ws, false, 1))
          any_oom.store(true, std::memory_order_relaxed);
        if (!last) {
          ++q;
          continue;
        }
        if (!small) claim(claims_for(t));
        q = after;
        end = after_end;
      }
    }
    const int size = omp_get_num_threads();
    {
      const std::lock_guard<std::mutex> lock(mu);
      ++finished;
    }
    cv.notify_all();
    if (tok != nullptr && tok->watched() && omp_get_thread_num() == 0) {
      std::unique_lock<std::mutex> lock(mu);
      while (finished < size) {
        cv.wait_for(lock, std::chrono::milliseconds(20));
        lock.unlock();
        tok->poll();
        lock.lock();
      }
    }
  }
  oom = any_oom.load();
#endif
  return oom;
}

}  // namespace aces_fast
