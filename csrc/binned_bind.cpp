// pybind11 bindings of the binned surrogate (binned.hpp): validation, output
// allocation, then the kernel with the GIL released. The validation rules and
// messages are those of module.cpp for the exact kernels (same arguments, same
// errors); bins and path are checked in addition.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "binned.hpp"

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
  py::array keep;
  const uint8_t* data = nullptr;
  int64_t n = 0;
  int64_t m = 0;
};

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
  if (M.n > static_cast<int64_t>(std::numeric_limits<int32_t>::max()))
    throw py::value_error(std::string(fn) + ": too many rows (n must be < 2**31)");
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

DoubleArray get_weights(const char* fn, const py::object& weights, int64_t m) {
  if (weights.is_none()) throw py::type_error(std::string(fn) + ": weights are required");
  DoubleArray w = get_vector(fn, "weights", weights, m, true);
  double sum = 0.0;
  for (int64_t k = 0; k < m; ++k) sum += w.data()[k];
  if (!std::isfinite(sum)) throw py::value_error(std::string(fn) + ": sum(weights) overflows");
  return w;
}

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

void check_bins(const char* fn, int64_t bins) {
  if (bins < 2 || bins > aces_fast::kMaxBins)
    throw py::value_error(std::string(fn) + ": bins must be in [2, " +
                          std::to_string(aces_fast::kMaxBins) + "], got " +
                          std::to_string(bins));
}

aces_fast::BinnedPath get_path(const char* fn, const std::string& path) {
  if (path == "auto") return aces_fast::BinnedPath::kAuto;
  if (path == "fft") return aces_fast::BinnedPath::kFft;
  if (path == "direct") return aces_fast::BinnedPath::kDirect;
  throw py::value_error(std::string(fn) + ": path must be 'auto', 'fft' or 'direct', got '" +
                        path + "'");
}

// ---------------------------------------------------------------------------------

py::tuple py_surrogate_binned(const py::object& B, const py::object& weights, double gamma,
                              int64_t bins, const py::object& counts, int n_threads,
                              const std::string& path) {
  const char* fn = "surrogate_loo_auc_binned";
  Matrix M = get_matrix(fn, B);
  DoubleArray w = get_weights(fn, weights, M.m);
  check_gamma(fn, gamma);
  check_bins(fn, bins);
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  check_threads(fn, n_threads);
  const aces_fast::BinnedPath pth = get_path(fn, path);

  py::array_t<double> L(static_cast<py::ssize_t>(M.m));
  py::array_t<double> grad(static_cast<py::ssize_t>(M.m));
  double* pL = L.mutable_data();
  double* pg = grad.mutable_data();
  const double* pw = w.data();
  double J = 0.0;
  {
    py::gil_scoped_release release;
    J = aces_fast::surrogate_loo_auc_binned(M.data, M.n, M.m, pw, gamma, pc, bins, pL, pg, true,
                                            n_threads, pth);
  }
  return py::make_tuple(L, J, grad);
}

py::tuple py_aces_o_fit_binned(const py::object& B, const py::object& logits0,
                               const py::object& active, double gamma, double lr, int64_t steps,
                               int64_t bins, const py::object& counts, int n_threads,
                               const std::string& path) {
  const char* fn = "aces_o_fit_binned";
  Matrix M = get_matrix(fn, B);
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
  check_bins(fn, bins);
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  check_threads(fn, n_threads);
  const aces_fast::BinnedPath pth = get_path(fn, path);

  py::array_t<double> weights(static_cast<py::ssize_t>(M.m));
  py::array_t<double> objective(static_cast<py::ssize_t>(steps + 1));
  double* pw = weights.mutable_data();
  double* po = objective.mutable_data();
  const double* pl = lg.data();
  {
    py::gil_scoped_release release;
    aces_fast::aces_o_fit_binned(M.data, M.n, M.m, pl, act.data(), gamma, lr, steps, pc, bins,
                                 pw, po, true, n_threads, pth);
  }
  return py::make_tuple(weights, objective);
}

py::tuple py_error_bound(double gamma, double h, double weight_sum) {
  const char* fn = "binned_error_bound";
  check_gamma(fn, gamma);
  if (!std::isfinite(h) || h < 0.0) throw py::value_error(std::string(fn) + ": h must be >= 0");
  if (!std::isfinite(weight_sum) || weight_sum < 0.0)
    throw py::value_error(std::string(fn) + ": weight_sum must be finite and >= 0");
  const aces_fast::BinnedBound b = aces_fast::binned_error_bound(gamma, h, weight_sum);
  return py::make_tuple(b.L, b.J, b.grad);
}

// Grid spacing the binned surrogate uses for these weights (same arithmetic as
// BinnedSurrogate::evaluate: scores summed in ascending column order).
double py_grid_spacing(const py::object& B, const py::object& weights, int64_t bins,
                       const py::object& counts) {
  const char* fn = "binned_grid_spacing";
  Matrix M = get_matrix(fn, B);
  DoubleArray w = get_weights(fn, weights, M.m);
  check_bins(fn, bins);
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  const double* pw = w.data();
  double wmax = 0.0;
  for (int64_t j = 0; j < M.m; ++j) wmax = std::max(wmax, pw[j]);
  bool any = false;
  double smin = 0.0, smax = 0.0;
  for (int64_t i = 0; i < M.n; ++i) {
    if (pc && pc[i] <= 0) continue;
    const uint8_t* row = M.data + i * M.m;
    double s = 0.0;
    for (int64_t j = 0; j < M.m; ++j)
      if (row[j]) s += pw[j];
    smin = any ? std::min(smin, s) : s;
    smax = any ? std::max(smax, s) : s;
    any = true;
  }
  if (!any) return 0.0;
  const double lo = std::max(0.0, smin - wmax);
  return (smax - lo) / static_cast<double>(bins - 1);
}

}  // namespace

void bind_binned(py::module_& mod) {
  mod.def("surrogate_loo_auc_binned", &py_surrogate_binned, py::arg("B"), py::arg("weights"),
          py::arg("gamma"), py::arg("bins") = 2048, py::arg("counts") = py::none(),
          py::arg("n_threads") = 0, py::arg("path") = "auto",
          "surrogate_loo_auc_binned(B, weights, gamma, bins=2048, counts=None, n_threads=0,\n"
          "                         path='auto') -> (L (m,), J, grad (m,))\n\n"
          "Grid approximation of surrogate_loo_auc (same arguments, validation, NaN rules):\n"
          "leave-one-out scores are spread by linear interpolation onto `bins` nodes over\n"
          "[max(0, min s - max w), max s] (spacing h = binned_grid_spacing(...)), pair sums\n"
          "become histogram convolutions (FFT or direct, per column by cost; path='fft' or\n"
          "'direct' forces one). |L - L_exact| <= binned_error_bound(gamma, h, W)[0], J and\n"
          "grad within [1] and [2] (W = sum of weights). Cost O(n m + m bins log bins).");

  mod.def("aces_o_fit_binned", &py_aces_o_fit_binned, py::arg("B"), py::arg("logits0"),
          py::arg("active"), py::arg("gamma"), py::arg("lr"), py::arg("steps"),
          py::arg("bins") = 2048, py::arg("counts") = py::none(), py::arg("n_threads") = 0,
          py::arg("path") = "auto",
          "aces_o_fit_binned(B, logits0, active, gamma, lr, steps, bins=2048, counts=None,\n"
          "                  n_threads=0, path='auto') -> (weights (m,), objective (steps+1,))\n\n"
          "aces_o_fit with the binned surrogate (same Adam, same conventions, same\n"
          "validation; bins as in surrogate_loo_auc_binned). At bins=2048, gamma=10 the final\n"
          "weights agree with aces_o_fit within 1e-4 (tested; <= 5e-6 on all HumanEval\n"
          "problems). Per step O(n m + m bins log bins) instead of O(sum_j |P_j||F_j|);\n"
          "cheaper than aces_o_fit only for large n (roughly n > 500 at bins=2048).");

  mod.def("binned_error_bound", &py_error_bound, py::arg("gamma"), py::arg("h"),
          py::arg("weight_sum") = 1.0,
          "binned_error_bound(gamma, h, weight_sum=1.0) -> (eps_L, eps_J, eps_grad)\n\n"
          "Bounds on the binned surrogate's error for grid spacing h, W = weight_sum:\n"
          "eps_L = gamma^2 h^2 / (24 sqrt 3) + 1e-10 (any column's L),\n"
          "eps_J = W eps_L,\n"
          "eps_grad = gamma^2 h^2 / (24 sqrt 3) + 3 gamma^3 h^2 W / 32 + 1e-10 (1 + 3 gamma W).\n"
          "From |E K(X) - K(E X)| <= sup|K''| Var(X) / 2 for linear interpolation (Var <= h^2/2),\n"
          "max|sigma''| = 1/(6 sqrt 3), max|sigma'''| = 1/8; 1e-10 covers rounding.");

  mod.def("binned_grid_spacing", &py_grid_spacing, py::arg("B"), py::arg("weights"),
          py::arg("bins") = 2048, py::arg("counts") = py::none(),
          "binned_grid_spacing(B, weights, bins=2048, counts=None) -> h\n\n"
          "Grid spacing surrogate_loo_auc_binned uses: (max s - max(0, min s - max w)) /\n"
          "(bins - 1), s = B @ weights over rows with count > 0.");
}
