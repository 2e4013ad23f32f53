// pybind11 bindings of aces_fast._core: argument validation and conversion, output
// allocation, then the kernel with the GIL released. No numerics here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels.hpp"

#ifndef ACES_FAST_VERSION
#define ACES_FAST_VERSION "0.0.0+unknown"
#endif

namespace py = pybind11;

namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

constexpr int64_t kMaxTotalCount = (int64_t(1) << 31) - 1;

std::string type_name(const py::handle& h) {
  return py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>();
}

std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

struct Matrix {
  py::array keep;  // keeps the buffer alive
  const uint8_t* data = nullptr;
  int64_t n = 0;
  int64_t m = 0;
};

// B: 2-D, C-contiguous numpy array of dtype uint8 or bool; used in place (no copy).
Matrix get_matrix(const char* fn, const py::object& obj) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(std::string(fn) +
                         ": B must be a 2-D numpy.ndarray of dtype uint8 or bool, got " +
                         type_name(obj));
  Matrix M;
  M.keep = py::reinterpret_borrow<py::array>(obj);
  const py::array& a = M.keep;
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
  if (M.n == 0) throw py::value_error(std::string(fn) + ": B has no rows (n = 0 candidates)");
  M.data = static_cast<const uint8_t*>(a.data());
  return M;
}

py::array as_numeric_array(const char* fn, const char* name, const py::object& obj,
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
    throw py::value_error(std::string(fn) + ": " + name + " must be 1-D, got ndim=" +
                          std::to_string(arr.ndim()));
  return arr;
}

// Float64 vector of length `len`; finite; >= 0 if nonneg.
DoubleArray get_vector(const char* fn, const char* name, const py::object& obj, int64_t len,
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

// Optional int64 row multiplicities of length n, each >= 0, total < 2^31.
// Returns None or a validated array (note: a default-constructed array_t is not
// null in pybind11, so optional arrays are passed around as py::object).
py::object get_counts(const char* fn, const py::object& obj, int64_t n) {
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
      throw py::value_error(std::string(fn) + ": counts must be >= 0 (entry " +
                            std::to_string(i) + " is " + std::to_string(p[i]) + ")");
    total += std::min<int64_t>(p[i], kMaxTotalCount);
    if (total > kMaxTotalCount)
      throw py::value_error(std::string(fn) + ": sum(counts) must be < 2**31");
  }
  return out;
}

const int64_t* counts_ptr(const py::object& c) {
  if (c.is_none()) return nullptr;
  return static_cast<const int64_t*>(py::reinterpret_borrow<py::array>(c).data());
}

void check_threads(const char* fn, int n_threads) {
  if (n_threads < 0)
    throw py::value_error(std::string(fn) + ": n_threads must be >= 0 (0 = OpenMP default)");
}

void check_gamma(const char* fn, double gamma) {
  if (!std::isfinite(gamma) || gamma <= 0.0)
    throw py::value_error(std::string(fn) + ": gamma must be finite and > 0");
}

void check_rows_int32(const char* fn, int64_t n) {
  if (n > static_cast<int64_t>(std::numeric_limits<int32_t>::max()))
    throw py::value_error(std::string(fn) + ": too many rows (n must be < 2**31)");
}

void check_weight_sum(const char* fn, const DoubleArray& w) {
  double sum = 0.0;
  for (py::ssize_t k = 0; k < w.shape(0); ++k) sum += w.data()[k];
  if (!std::isfinite(sum)) throw py::value_error(std::string(fn) + ": sum(weights) overflows");
}

// ---------------------------------------------------------------------------------

py::array_t<double> py_loo_auc(const py::object& B, const py::object& weights,
                               const py::object& counts, double tie_tol, int n_threads) {
  const char* fn = "loo_auc";
  Matrix M = get_matrix(fn, B);
  const double* pw = nullptr;
  py::object w_keep;
  if (!weights.is_none()) {
    DoubleArray w = get_vector(fn, "weights", weights, M.m, true);
    check_weight_sum(fn, w);
    pw = w.data();
    w_keep = w;
  }
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  if (!std::isfinite(tie_tol) || tie_tol < 0.0)
    throw py::value_error(std::string(fn) + ": tie_tol must be finite and >= 0");
  check_threads(fn, n_threads);

  py::array_t<double> out(static_cast<py::ssize_t>(M.m));
  double* po = out.mutable_data();
  {
    py::gil_scoped_release release;
    aces_fast::loo_auc(M.data, M.n, M.m, pw, pc, tie_tol, po, true, n_threads);
  }
  return out;
}

py::tuple py_surrogate(const py::object& B, const py::object& weights, double gamma,
                       const py::object& counts, int n_threads) {
  const char* fn = "surrogate_loo_auc";
  Matrix M = get_matrix(fn, B);
  check_rows_int32(fn, M.n);
  if (weights.is_none()) throw py::type_error(std::string(fn) + ": weights are required");
  DoubleArray w = get_vector(fn, "weights", weights, M.m, true);
  check_weight_sum(fn, w);
  check_gamma(fn, gamma);
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  check_threads(fn, n_threads);

  py::array_t<double> L(static_cast<py::ssize_t>(M.m));
  py::array_t<double> grad(static_cast<py::ssize_t>(M.m));
  double* pL = L.mutable_data();
  double* pg = grad.mutable_data();
  const double* pw = w.data();
  double J = 0.0;
  {
    py::gil_scoped_release release;
    J = aces_fast::surrogate_loo_auc(M.data, M.n, M.m, pw, gamma, pc, pL, pg, true, n_threads);
  }
  return py::make_tuple(L, J, grad);
}

py::tuple py_aces_o_fit(const py::object& B, const py::object& logits0, const py::object& active,
                        double gamma, double lr, int64_t steps, const py::object& counts,
                        int n_threads) {
  const char* fn = "aces_o_fit";
  Matrix M = get_matrix(fn, B);
  check_rows_int32(fn, M.n);
  // active: mask of length m (bool, integer or float), nonzero = active
  py::array act_arr = as_numeric_array(fn, "active", active, "biuf");
  if (static_cast<int64_t>(act_arr.shape(0)) != M.m)
    throw py::value_error(std::string(fn) + ": active must have length m = " +
                          std::to_string(M.m) + ", got " + std::to_string(act_arr.shape(0)));
  DoubleArray actd = DoubleArray::ensure(act_arr);
  if (!actd) throw py::error_already_set();
  std::vector<uint8_t> act(static_cast<size_t>(M.m));
  for (int64_t j = 0; j < M.m; ++j) {
    if (std::isnan(actd.data()[j]))
      throw py::value_error(std::string(fn) + ": active must not contain nan");
    act[j] = actd.data()[j] != 0.0;
  }
  // logits0: float vector of length m, finite on the active columns
  py::array lg_arr = as_numeric_array(fn, "logits0", logits0, "biuf");
  if (static_cast<int64_t>(lg_arr.shape(0)) != M.m)
    throw py::value_error(std::string(fn) + ": logits0 must have length m = " +
                          std::to_string(M.m) + ", got " + std::to_string(lg_arr.shape(0)));
  DoubleArray lg = DoubleArray::ensure(lg_arr);
  if (!lg) throw py::error_already_set();
  for (int64_t j = 0; j < M.m; ++j)
    if (act[j] && !std::isfinite(lg.data()[j]))
      throw py::value_error(std::string(fn) + ": logits0 must be finite on active columns (entry " +
                            std::to_string(j) + ")");
  check_gamma(fn, gamma);
  if (!std::isfinite(lr) || lr < 0.0)
    throw py::value_error(std::string(fn) + ": lr must be finite and >= 0");
  if (steps < 0) throw py::value_error(std::string(fn) + ": steps must be >= 0");
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  check_threads(fn, n_threads);

  py::array_t<double> weights(static_cast<py::ssize_t>(M.m));
  py::array_t<double> objective(static_cast<py::ssize_t>(steps + 1));
  double* pw = weights.mutable_data();
  double* po = objective.mutable_data();
  const double* pl = lg.data();
  {
    py::gil_scoped_release release;
    aces_fast::aces_o_fit(M.data, M.n, M.m, pl, act.data(), gamma, lr, steps, pc, pw, po, true,
                          n_threads);
  }
  return py::make_tuple(weights, objective);
}

}  // namespace

PYBIND11_MODULE(_core, mod) {
  mod.doc() =
      "aces_fast._core: compiled ACES kernels (LOO-AUC, surrogate LOO-AUC, ACES-O fit).\n\n"
      "B must be a 2-D C-contiguous numpy array of dtype uint8 or bool (used in place, any\n"
      "nonzero byte is a pass). counts (optional, int, length n) are row multiplicities.\n"
      "Every function releases the GIL; n_threads=0 means the OpenMP default.";
  mod.attr("__version__") = ACES_FAST_VERSION;

  mod.def("has_openmp", &aces_fast::has_openmp, "True if the extension was built with OpenMP.");
  mod.def("max_threads", &aces_fast::max_threads,
          "Threads a kernel uses with n_threads=0 (omp_get_max_threads(), or 1).");

  mod.def("loo_auc", &py_loo_auc, py::arg("B"), py::arg("weights") = py::none(),
          py::arg("counts") = py::none(), py::arg("tie_tol") = 1e-9, py::arg("n_threads") = 0,
          "loo_auc(B, weights=None, counts=None, tie_tol=1e-9, n_threads=0) -> ndarray (m,)\n\n"
          "Leave-one-out AUC of every test: AUC(B @ w - w_j B[:, j], B[:, j]); nan for a\n"
          "column with no passer or no failer (among rows with count > 0).\n"
          "weights=None: uniform integer weights, exact. Float weights (>= 0): with\n"
          "x = s_p - w_j and T = tie_tol * sum(w), a failer f is a win if s_f < x - T and a\n"
          "tie if x - T <= s_f <= x + T.");

  mod.def("surrogate_loo_auc", &py_surrogate, py::arg("B"), py::arg("weights"),
          py::arg("gamma"), py::arg("counts") = py::none(), py::arg("n_threads") = 0,
          "surrogate_loo_auc(B, weights, gamma, counts=None, n_threads=0) -> (L, J, grad)\n\n"
          "L_j = mean over pass/fail pairs of sigmoid(gamma (s_p - s_f - w_j)) (nan if a class\n"
          "is empty), J = sum_j w_j (L_j - 1/2) over nonempty columns, grad = dJ/dw.");

  mod.def("aces_o_fit", &py_aces_o_fit, py::arg("B"), py::arg("logits0"), py::arg("active"),
          py::arg("gamma"), py::arg("lr"), py::arg("steps"), py::arg("counts") = py::none(),
          py::arg("n_threads") = 0,
          "aces_o_fit(B, logits0, active, gamma, lr, steps, counts=None, n_threads=0)\n"
          "    -> (weights (m,), objective (steps+1,))\n\n"
          "ACES-O: Adam (PyTorch semantics, betas (0.9, 0.999), eps 1e-8) maximizing\n"
          "J(softmax(logits)) over the active columns; inactive columns get weight 0.\n"
          "objective[t] = J after t updates. No active column: all zeros.");
}
