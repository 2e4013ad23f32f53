// pybind11 bindings of the binned surrogate (binned.hpp): validation, output
// allocation, then the kernel with the GIL released. Validation is shared with
// module.cpp (bind_util.hpp: same arguments, same errors); bins and path are
// checked in addition.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings/bind_util.hpp"
#include "kernels/binned.hpp"

namespace py = pybind11;

namespace {

using namespace aces_fast::bind;

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
  check_rows_int32(fn, M.n);
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
  check_rows_int32(fn, M.n);
  const std::vector<uint8_t> act = get_active(fn, active, M.m);
  DoubleArray lg = get_logits0(fn, logits0, act, M.m);
  check_gamma(fn, gamma);
  check_lr_steps(fn, lr, steps);
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
  check_rows_int32(fn, M.n);
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
