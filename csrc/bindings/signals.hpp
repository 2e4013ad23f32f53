// Ctrl-C during a long _core call: the bindings' side of kernels/interrupt.hpp.
//
// Every binding that runs kernels holds a SignalWatch around its GIL-released
// block. On the Python main thread (the only one Python delivers signals to)
// the watch's token re-acquires the GIL at most every kPeriodNs while the
// kernels run, calls PyErr_CheckSignals() and, when a handler raised (SIGINT:
// KeyboardInterrupt), keeps that exception and cancels the token; the kernels
// stop at their next safe point and the binding re-raises the exception once
// the GIL is back. Calls shorter than one period never take the GIL; calls
// from other threads are never cancelled.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "bindings/bind_util.hpp"
#include "kernels/interrupt.hpp"

namespace aces_fast {
namespace bind {

namespace py = pybind11;

// The raised exception as one object (a new reference), the error indicator
// cleared: Python 3.12's PyErr_GetRaisedException, on older versions too.
inline PyObject* take_raised() {
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException();
#else
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  return value;
#endif
}

// Raises exc again (steals the reference): PyErr_SetRaisedException.
inline void restore_raised(PyObject* exc) {
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(exc);
#else
  PyErr_Restore(Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(exc))), exc,
                PyException_GetTraceback(exc));
#endif
}

// Identifier of the thread Python runs signal handlers on
// (threading.main_thread()); set by init_signal_watch.
inline unsigned long& main_thread_ident() {
  static unsigned long ident = 0;
  return ident;
}

// Once, at module import (GIL held): a lazy lookup inside a call could deadlock
// on a static-initialization guard while another thread waits for the GIL.
inline void init_signal_watch() {
  main_thread_ident() =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

class SignalWatch {
 public:
  // How often a running call looks at Python's signals: Ctrl-C is seen within
  // about this plus one safe point's worth of work.
  static constexpr int64_t kPeriodNs = 50 * 1000 * 1000;

  // With the GIL held, on the calling thread, before releasing the GIL.
  SignalWatch() : token_(on_main_thread() ? &check : nullptr, this, kPeriodNs), scope_(&token_) {}

  // With the GIL held (after the GIL-released block, also when unwinding).
  ~SignalWatch() { Py_XDECREF(exc_); }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // With the GIL held, after the kernels returned: raises what a signal handler
  // raised during the call (KeyboardInterrupt for Ctrl-C), if anything.
  void raise_if_interrupted() {
    if (!token_.cancelled()) return;
    PyObject* exc = exc_;
    exc_ = nullptr;
    if (exc != nullptr)
      restore_raised(exc);
    else  // cannot happen (a check cancels only with an exception); never return garbage
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }

 private:
  static bool on_main_thread() { return PyThread_get_thread_ident() == main_thread_ident(); }

  // The token's check, on the calling (main) thread while the GIL is released.
  static bool check(void* ctx) {
    SignalWatch* self = static_cast<SignalWatch*>(ctx);
    const PyGILState_STATE st = PyGILState_Ensure();
    const bool raised = PyErr_CheckSignals() != 0;
    if (raised) self->exc_ = take_raised();
    PyGILState_Release(st);
    return raised;
  }

  PyObject* exc_ = nullptr;  // what a signal handler raised (a new reference)
  interrupt::Token token_;
  interrupt::Scope scope_;
};

}  // namespace bind
}  // namespace aces_fast
