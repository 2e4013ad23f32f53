// Argument conversion shared by the pybind11 bindings (module.cpp,
// binned_bind.cpp), so every function of _core accepts the same inputs and raises
// the same errors. Errors name the calling function (`fn`) and the argument.
//
// _core is private: the package validates every parameter's meaning (ranges of
// gamma, lr, top_k, tie_tol, ...) once, at the Python boundary. What is checked
// here is only what keeps the C++ side memory-safe: types, dtypes, layouts,
// lengths, the kernels' numeric preconditions (finite weights, counts that fit
// their integer accumulators) and sizes that would overflow an allocation or an
// index.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "simd/simd.hpp"

namespace aces_fast {
namespace bind {

namespace py = pybind11;

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

constexpr int64_t kMaxTotalCount = (int64_t(1) << 31) - 1;

inline std::string type_name(const py::handle& h) {
  return py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>();
}

inline std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// The arguments of a call as METH_FASTCALL | METH_KEYWORDS receives them:
// args[0, nargs) positional, then one value per name of kwnames (a tuple).
struct FastArgs {
  PyObject* const* args;
  Py_ssize_t nargs;
  PyObject* kwnames;
};

// The signature of a _core function: keyword-only arguments, all required,
// nothing else accepted. The functions are plain vectorcall functions (see
// fastcall below) that parse with this: pybind11's own keyword matching creates
// and interns every parameter name anew on each call (~800 instructions per
// name, most of what binding a small call costs); here the names are interned
// once and the caller's keywords, interned by its code object, match them by
// identity.
class Keywords {
 public:
  static constexpr size_t kMax = 16;

  // With the GIL held (the interned names live as long as the process).
  Keywords(const char* fn, std::initializer_list<const char*> names) : fn_(fn), n_(names.size()) {
    if (n_ > kMax) throw std::logic_error("Keywords: too many parameters");
    size_t i = 0;
    for (const char* name : names) {
      text_[i] = name;
      names_[i] = PyUnicode_InternFromString(name);
      if (names_[i] == nullptr) throw py::error_already_set();
      ++i;
    }
  }
  Keywords(const Keywords&) = delete;
  Keywords& operator=(const Keywords&) = delete;

  const char* fn() const { return fn_; }

  // out[i] = the argument named names[i] (borrowed from the caller). TypeError,
  // worded as Python's own, for positional arguments and for a missing or an
  // unexpected keyword (the caller's syntax already excludes repeated ones).
  void parse(const FastArgs& call, py::handle* out) const {
    const Py_ssize_t npos = PyVectorcall_NARGS(call.nargs);
    if (npos != 0)
      throw py::type_error(std::string(fn_) + "() takes keyword arguments only (" +
                           std::to_string(npos) + " positional given)");
    for (size_t i = 0; i < n_; ++i) out[i] = py::handle();
    const Py_ssize_t nk = call.kwnames != nullptr ? PyTuple_GET_SIZE(call.kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; ++k) {
      PyObject* const key = PyTuple_GET_ITEM(call.kwnames, k);
      size_t i = 0;
      while (i < n_ && names_[i] != key) ++i;
      if (i == n_)  // not interned (e.g. built at run time): compare the text
        for (i = 0; i < n_ && PyUnicode_Compare(key, names_[i]) != 0; ++i) {
        }
      if (PyErr_Occurred()) throw py::error_already_set();
      if (i == n_)
        throw py::type_error(std::string(fn_) + "() got an unexpected keyword argument '" +
                             py::str(key).cast<std::string>() + "'");
      out[i] = call.args[k];
    }
    for (size_t i = 0; i < n_; ++i)
      if (!out[i])
        throw py::type_error(std::string(fn_) + "() missing required keyword argument '" +
                             text_[i] + "'");
  }

 private:
  const char* fn_;
  size_t n_;
  std::array<const char*, kMax> text_{};
  std::array<PyObject*, kMax> names_{};
};

// Sets the Python error for the C++ exception being handled, as pybind11's
// dispatcher would (the exceptions the bindings throw).
inline void set_python_error() noexcept {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

// The METH_FASTCALL | METH_KEYWORDS entry of a _core function F, for a
// PyMethodDef: F parses its arguments with a Keywords and returns its result.
template <py::object (*F)(const FastArgs&)>
PyObject* fastcall(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs,
                   PyObject* kwnames) noexcept {
  try {
    return F(FastArgs{args, nargs, kwnames}).release().ptr();
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

// fastcall<F> as the PyCFunction a PyMethodDef holds (through void (*)(), the
// cast C API code uses for METH_FASTCALL functions).
template <py::object (*F)(const FastArgs&)>
PyCFunction fastcall_entry() {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fastcall<F>));
}

// Adds a null-terminated table of functions (static storage) to the module.
inline void add_functions(py::module_& mod, PyMethodDef* defs) {
  if (PyModule_AddFunctions(mod.ptr(), defs) != 0) throw py::error_already_set();
}

// A real number (float, int or anything with __float__) as double; TypeError
// naming the argument otherwise.
inline double get_double(const char* fn, const char* name, py::handle h) {
  if (PyFloat_CheckExact(h.ptr())) return PyFloat_AS_DOUBLE(h.ptr());
  if (PyBool_Check(h.ptr()) || !(PyFloat_Check(h.ptr()) || PyIndex_Check(h.ptr()) ||
                                 Py_TYPE(h.ptr())->tp_as_number != nullptr))
    throw py::type_error(std::string(fn) + ": " + name + " must be a real number, got " +
                         type_name(h));
  const double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::type_error(std::string(fn) + ": " + name + " must be a real number, got " +
                         type_name(h));
  }
  return v;
}

// A bool (True/False, numpy.bool_ included); TypeError naming the argument otherwise.
inline bool get_bool(const char* fn, const char* name, py::handle h) {
  if (h.ptr() == Py_True) return true;
  if (h.ptr() == Py_False) return false;
  if (py::isinstance(h, py::module_::import("numpy").attr("bool_")))
    return PyObject_IsTrue(h.ptr()) == 1;
  throw py::type_error(std::string(fn) + ": " + name + " must be a bool, got " + type_name(h));
}

// A str; TypeError naming the argument otherwise.
inline std::string get_str(const char* fn, const char* name, py::handle h) {
  if (!PyUnicode_Check(h.ptr()))
    throw py::type_error(std::string(fn) + ": " + name + " must be a str, got " + type_name(h));
  return py::cast<std::string>(h);
}

struct Matrix {
  // keeps the buffer alive; a py::object, because a default py::array is a new
  // empty array (an allocation per task of a batch, for nothing)
  py::object keep;
  const uint8_t* data = nullptr;
  int64_t n = 0;
  int64_t m = 0;
};

// The error for a matrix with no candidates; where: e.g. "rerank_batch_flat: task 3".
[[noreturn]] inline void raise_no_rows(const std::string& where) {
  throw py::value_error(where + ": B has no rows (n = 0 candidates)");
}

// B: 2-D, C-contiguous numpy array of dtype uint8 or bool; used in place (no copy).
inline Matrix get_matrix(const char* fn, py::handle obj) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(fn) +
                         ": B must be a 2-D numpy.ndarray of dtype uint8 or bool, got " +
                         type_name(obj));
  Matrix M;
  const auto a = py::reinterpret_borrow<py::array>(obj);
  M.keep = a;
  if (a.ndim() != 2)
    throw py::value_error(std::string(fn) + ": B must be 2-D (candidates x tests), got ndim=" +
                          std::to_string(a.ndim()));
  const char kind = a.dtype().kind();
  if (!((kind == 'u' || kind == 'b') && a.itemsize() == 1))
    throw py::type_error(std::string(fn) + ": B must have dtype uint8 or bool, got " +
                         dtype_name(a) + " (convert with np.ascontiguousarray(B, dtype=np.uint8))");
  if (!(a.flags() & py::array::c_style))
    throw py::type_error(std::string(fn) +
                         ": B must be C-contiguous (use np.ascontiguousarray(B))");
  M.n = static_cast<int64_t>(a.shape(0));
  M.m = static_cast<int64_t>(a.shape(1));
  if (M.n == 0) raise_no_rows(fn);
  M.data = static_cast<const uint8_t*>(a.data());
  return M;
}

// The value check of a pass matrix, run inside every call that takes one (with
// the GIL released, before the kernels): the largest byte of B when it is not
// 0/1 data, else 0. The vectorized max_byte scan costs a fraction of any kernel.
// rerank and rerank_batch check inside run_method instead (in the pass that
// deduplicates rows, when there is one) and call this only for the message.
inline int bad_byte(const Matrix& M) {
  const int mx = aces_fast::max_byte(M.data, M.n * M.m);
  return mx > 1 ? mx : 0;
}

// The error for bad_byte's value, raised once the GIL is held again; the
// package's own message (the public functions rely on this check). prefix:
// e.g. "task 3: " in a batch.
[[noreturn]] inline void raise_not_binary(const std::string& prefix, int value) {
  throw py::value_error(prefix + "B must contain only 0 and 1; found value " +
                        std::to_string(value));
}

// The kernels index rows with int32 in places.
inline void check_rows_int32(const char* fn, int64_t n) {
  if (n > static_cast<int64_t>(std::numeric_limits<int32_t>::max()))
    throw py::value_error(std::string(fn) + ": too many rows (n must be < 2**31)");
}

inline py::array as_numeric_array(const char* fn, const char* name, py::handle obj,
                                  const char* kinds) {
  py::array arr = py::array::ensure(obj);
  if (!arr) {
    PyErr_Clear();
    throw py::type_error(std::string(fn) + ": " + name + " must be array-like, got " +
                         type_name(obj));
  }
  const char kind = arr.dtype().kind();
  if (std::string(kinds).find(kind) == std::string::npos)
    throw py::type_error(std::string(fn) + ": " + name + " has unsupported dtype " +
                         dtype_name(arr));
  if (arr.ndim() != 1)
    throw py::value_error(std::string(fn) + ": " + name +
                          " must be 1-D, got ndim=" + std::to_string(arr.ndim()));
  return arr;
}

// Float64 vector of length `len`; finite; >= 0 if nonneg.
inline DoubleArray get_vector(const char* fn, const char* name, py::handle obj, int64_t len,
                              bool nonneg) {
  py::array arr = as_numeric_array(fn, name, obj, "biuf");
  if (static_cast<int64_t>(arr.shape(0)) != len)
    throw py::value_error(std::string(fn) + ": " + name + " must have length " +
                          std::to_string(len) + ", got " + std::to_string(arr.shape(0)));
  DoubleArray out = DoubleArray::ensure(arr);
  if (!out) throw py::error_already_set();
  const double* p = out.data();
  for (int64_t k = 0; k < len; ++k) {
    if (!std::isfinite(p[k]))
      throw py::value_error(std::string(fn) + ": " + name + " must be finite (entry " +
                            std::to_string(k) + " is " + std::to_string(p[k]) + ")");
    if (nonneg && p[k] < 0.0)
      throw py::value_error(std::string(fn) + ": " + name + " must be >= 0 (entry " +
                            std::to_string(k) + " is " + std::to_string(p[k]) + ")");
  }
  return out;
}

inline void check_weight_sum(const char* fn, const DoubleArray& w) {
  double sum = 0.0;
  for (py::ssize_t k = 0; k < w.shape(0); ++k) sum += w.data()[k];
  if (!std::isfinite(sum)) throw py::value_error(std::string(fn) + ": sum(weights) overflows");
}

// Required weights: m finite values >= 0 with a finite sum.
inline DoubleArray get_weights(const char* fn, py::handle weights, int64_t m) {
  if (weights.is_none()) throw py::type_error(std::string(fn) + ": weights are required");
  DoubleArray w = get_vector(fn, "weights", weights, m, true);
  check_weight_sum(fn, w);
  return w;
}

// Optional int64 row multiplicities of length n, each >= 0, total < 2^31.
// Returns None or a validated array (note: a default-constructed array_t is not
// null in pybind11, so optional arrays are passed around as py::object).
inline py::object get_counts(const char* fn, py::handle obj, int64_t n) {
  if (obj.is_none()) return py::none();
  py::array arr = as_numeric_array(fn, "counts", obj, "biu");
  if (static_cast<int64_t>(arr.shape(0)) != n)
    throw py::value_error(std::string(fn) + ": counts must have length n = " + std::to_string(n) +
                          ", got " + std::to_string(arr.shape(0)));
  Int64Array out = Int64Array::ensure(arr);
  if (!out) throw py::error_already_set();
  const int64_t* p = out.data();
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] < 0)
      throw py::value_error(std::string(fn) + ": counts must be >= 0 (entry " + std::to_string(i) +
                            " is " + std::to_string(p[i]) + ")");
    total += std::min<int64_t>(p[i], kMaxTotalCount);
    if (total > kMaxTotalCount)
      throw py::value_error(std::string(fn) + ": sum(counts) must be < 2**31");
  }
  return out;
}

inline const int64_t* counts_ptr(const py::object& c) {
  if (c.is_none()) return nullptr;
  return static_cast<const int64_t*>(py::reinterpret_borrow<py::array>(c).data());
}

// Float64 copy (or view) of a numeric 1-D vector with one entry per column (m);
// values unchecked.
inline DoubleArray get_column_vector(const char* fn, const char* name, py::handle obj, int64_t m) {
  py::array arr = as_numeric_array(fn, name, obj, "biuf");
  if (static_cast<int64_t>(arr.shape(0)) != m)
    throw py::value_error(std::string(fn) + ": " + name + " must have length m = " +
                          std::to_string(m) + ", got " + std::to_string(arr.shape(0)));
  DoubleArray out = DoubleArray::ensure(arr);
  if (!out) throw py::error_already_set();
  return out;
}

// ACES-O active: mask of length m (bool, integer or float), nonzero = active.
inline std::vector<uint8_t> get_active(const char* fn, py::handle active, int64_t m) {
  const DoubleArray actd = get_column_vector(fn, "active", active, m);
  std::vector<uint8_t> act(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) act[static_cast<size_t>(j)] = actd.data()[j] != 0.0;
  return act;
}

// An integer (a Python int or anything with __index__, not bool) as int64 in
// [lo, hi], else ValueError naming the argument (values beyond int64 included);
// TypeError for anything else. `why` (may be empty) explains the range.
inline int64_t get_int(const char* fn, const char* name, py::handle obj, int64_t lo, int64_t hi,
                       const char* why) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr()))
    throw py::type_error(std::string(fn) + ": " + name + " must be an int, got " + type_name(obj));
  const py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!idx) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || v < lo || v > hi)
    throw py::value_error(std::string(fn) + ": " + name + " must be in [" + std::to_string(lo) +
                          ", " + std::to_string(hi) + "]" + why + ", got " +
                          py::str(idx).cast<std::string>());
  return static_cast<int64_t>(v);
}

// Most threads a call may ask for: per-thread scratch is sized by it, and no
// machine this targets has more hardware threads.
constexpr int64_t kMaxThreads = 4096;

// n_threads: 1 .. kMaxThreads exactly that many; -kMaxThreads .. -1 chosen by
// the work, at most -n_threads; 0 the same, at most the OpenMP default
// (kernels.hpp, threads_for_work).
inline int get_threads(const char* fn, py::handle n_threads) {
  return static_cast<int>(get_int(fn, "n_threads", n_threads, -kMaxThreads, kMaxThreads,
                                  " (0 or < 0 = chosen by the work)"));
}

// ACES-O steps: the objective output holds steps + 1 float64 values, so steps + 1
// must be a valid array length (no signed overflow in steps + 1 either).
inline int64_t get_steps(const char* fn, py::handle steps) {
  constexpr int64_t kMax =
      static_cast<int64_t>(std::numeric_limits<py::ssize_t>::max() / sizeof(double)) - 1;
  return get_int(fn, "steps", steps, 0, kMax, " (the objective holds steps + 1 float64 values)");
}

// ACES-O top_k: None -> -1 (every row); an int >= 1, where anything beyond int64
// (or >= n) also means every row, since the optimized rows are min(top_k, n).
inline int64_t get_top_k(const char* fn, py::handle top_k) {
  if (top_k.is_none()) return -1;
  if (PyBool_Check(top_k.ptr()) || !PyIndex_Check(top_k.ptr()))
    throw py::type_error(std::string(fn) + ": top_k must be an int or None, got " +
                         type_name(top_k));
  const py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(top_k.ptr()));
  if (!idx) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow > 0) return std::numeric_limits<int64_t>::max();
  if (overflow < 0 || v < 1)
    throw py::value_error(std::string(fn) + ": top_k must be >= 1 or None, got " +
                          py::str(idx).cast<std::string>());
  return static_cast<int64_t>(v);
}

// dedup: None (auto) -> -1, True -> 1, False -> 0.
inline int get_dedup(const char* fn, py::handle obj) {
  if (obj.is_none()) return -1;
  if (!PyBool_Check(obj.ptr()))
    throw py::type_error(std::string(fn) + ": dedup must be True, False or None (auto), got " +
                         type_name(obj));
  return obj.ptr() == Py_True ? 1 : 0;
}

}  // namespace bind
}  // namespace aces_fast
