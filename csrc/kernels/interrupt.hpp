// Cooperative cancellation of long compiled calls (Ctrl-C).
//
// A binding creates one Token per call on the calling thread and installs it
// with a Scope; kernels poll it at cheap safe points (per Adam step, per block
// of columns, per task) and, once it is cancelled, skip the rest of their work:
// their outputs are then meaningless and the binding raises instead of
// returning them. Nothing here throws, so polling is safe inside OpenMP
// regions, and every thread simply runs out of work (no thread is left behind).
//
// poll() is a relaxed atomic load on any thread. On the token's owner thread it
// also reads a coarse clock and, at most once per period, runs the token's
// check, which may cancel it (the bindings' check takes the GIL and runs
// Python's signal handlers). Until the first period has passed no check runs,
// so a short call never pays one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "kernels/thread_slot.hpp"

#if defined(__linux__)
#include <time.h>
#endif

namespace aces_fast {
namespace interrupt {

// Monotonic nanoseconds from a cheap clock: CLOCK_MONOTONIC_COARSE on Linux
// (a few ns per read through the vDSO, resolution of a scheduler tick), which is
// plenty for periods of tens of milliseconds.
inline int64_t now_ns() {
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
#else
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
#endif
}

class Token {
 public:
  // Returns true to cancel; runs on the owner thread only.
  using Check = bool (*)(void* ctx);

  // The constructing thread owns the token. check (nullable: never cancelled
  // by a check) runs at most once per period_ns, the first time period_ns after
  // construction.
  Token(Check check, void* ctx, int64_t period_ns)
      : owner_(std::this_thread::get_id()),
        check_(check),
        ctx_(ctx),
        period_ns_(period_ns),
        next_ns_(check != nullptr ? now_ns() + period_ns : 0) {}
  Token(const Token&) = delete;
  Token& operator=(const Token&) = delete;

  bool cancelled() const { return flag_.load(std::memory_order_relaxed); }
  void cancel() { flag_.store(true, std::memory_order_relaxed); }
  // True when a check can cancel the token (its owner keeps polling then).
  bool watched() const { return check_ != nullptr; }

  // True once cancelled. Any thread; see the file comment for the owner's part.
  bool poll() {
    if (cancelled()) return true;
    if (check_ == nullptr || std::this_thread::get_id() != owner_) return false;
    if (now_ns() < next_ns_) return false;
    if (check_(ctx_)) {
      cancel();
      return true;
    }
    next_ns_ = now_ns() + period_ns_;
    return false;
  }

 private:
  std::atomic<bool> flag_{false};
  const std::thread::id owner_;
  const Check check_;
  void* const ctx_;
  const int64_t period_ns_;
  int64_t next_ns_;  // owner thread only
};

// The token of the call the calling thread is working for, or nullptr.
inline Token* current() { return thread_slot<Token>(); }

// Makes a token the calling thread's for its lifetime (nested scopes restore
// the outer token). A batch scheduler opens one on each of its threads.
using Scope = ThreadScope<Token>;

// Polls the calling thread's token; false without one.
inline bool poll() {
  Token* const t = current();
  return t != nullptr && t->poll();
}

// True when the calling thread's token is cancelled (no polling, no check).
inline bool cancelled() {
  const Token* const t = current();
  return t != nullptr && t->cancelled();
}

}  // namespace interrupt
}  // namespace aces_fast
