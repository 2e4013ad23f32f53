// A per-thread pointer with a scoped setter (internal header): what a caller
// hands the kernels it runs without threading it through every signature
// (interrupt.hpp's token, ahead.hpp's prefetch lines).
#pragma once

namespace aces_fast {

// The calling thread's T*, one slot per T (nullptr until a ThreadScope sets it).
template <typename T>
T*& thread_slot() {
  static thread_local T* slot = nullptr;
  return slot;
}

// Makes p the calling thread's T* for the scope's lifetime (nested scopes
// restore the outer pointer).
template <typename T>
class ThreadScope {
 public:
  explicit ThreadScope(T* p) : prev_(thread_slot<T>()) { thread_slot<T>() = p; }
  ~ThreadScope() { thread_slot<T>() = prev_; }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  T* const prev_;
};

}  // namespace aces_fast
