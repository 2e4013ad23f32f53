// pybind11 bindings of aces_fast._core: argument conversion and the checks that
// keep the C++ side memory-safe (bind_util.hpp), output allocation, then, with
// the GIL released, the 0/1 check of B and the kernels, watched for Ctrl-C
// (signals.hpp). No numerics here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/bind_util.hpp"
#include "bindings/binned_bind.hpp"
#include "bindings/output_pool.hpp"
#include "bindings/part_bind.hpp"
#include "bindings/signals.hpp"
#include "kernels/dedup.hpp"
#include "kernels/kernels.hpp"
#include "methods/batch.hpp"
#include "methods/methods.hpp"
#include "methods/pass_at_k.hpp"
#include "simd/simd.hpp"

#ifndef ACES_FAST_VERSION
#define ACES_FAST_VERSION "0.0.0+unknown"
#endif

namespace py = pybind11;

namespace {

using namespace aces_fast::bind;

// Row counts to hand a kernel: the caller's counts, or (dedup) the class
// multiplicities of identical rows merged with them. plan must outlive the call.
const int64_t* dedup_counts(const Matrix& M, const int64_t* pc, bool use, aces_fast::RowPlan& plan,
                            int n_threads) {
  if (!use || M.n < 2) return pc;
  aces_fast::dedup_rows(M.data, M.n, M.m, pc, plan, true, n_threads);
  aces_fast::release_dedup_scratch(plan);
  int64_t kept = 0;
  for (int64_t i = 0; i < M.n; ++i) kept += (pc ? pc[i] > 0 : true) ? 1 : 0;
  if (plan.distinct == kept) {  // nothing merged: keep the caller's counts, free the plan
    plan = aces_fast::RowPlan();
    return pc;
  }
  return plan.counts.data();
}

// ---------------------------------------------------------------------------------

py::object py_loo_auc(const FastArgs& args) {
  static const Keywords sig("loo_auc", {"B", "weights", "counts", "tie_tol", "dedup", "n_threads"});
  py::handle a[6];
  sig.parse(args, a);
  const py::handle B = a[0], weights = a[1], counts = a[2], dedup = a[4], n_threads = a[5];
  const char* fn = sig.fn();
  Matrix M = get_matrix(fn, B);
  check_rows_int32(fn, M.n);
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
  const double tie_tol = get_double(fn, "tie_tol", a[3]);
  const int dd = get_dedup(fn, dedup);
  const int nt = get_threads(fn, n_threads);
  const bool use = dd > 0 || (dd < 0 && aces_fast::dedup_pays_for_loo(M.n, M.m));

  py::array_t<double> out(static_cast<py::ssize_t>(M.m));
  double* po = out.mutable_data();
  SignalWatch watch;
  int bad = 0;
  {
    py::gil_scoped_release release;
    bad = bad_byte(M);
    if (bad == 0) {
      aces_fast::RowPlan plan;
      const int64_t* kc = dedup_counts(M, pc, use, plan, nt);
      if (pw == nullptr && kc != pc) {
        plan.rep = std::vector<int64_t>();  // only counts and row sums are needed
        // the hash pass already counted every row's passes
        aces_fast::UniformScratch ws;
        aces_fast::loo_auc_uniform_ex(M.data, M.n, M.m, kc, plan.rowsum.data(), po, nullptr, true,
                                      nt, ws);
      } else {
        aces_fast::loo_auc(M.data, M.n, M.m, pw, kc, tie_tol, po, true, nt);
      }
    }
  }
  watch.raise_if_interrupted();
  if (bad != 0) raise_not_binary("", bad);
  return out;
}

py::object py_surrogate(const FastArgs& args) {
  static const Keywords sig("surrogate_loo_auc",
                            {"B", "weights", "gamma", "counts", "dedup", "n_threads"});
  py::handle a[6];
  sig.parse(args, a);
  const py::handle B = a[0], weights = a[1], counts = a[3], dedup = a[4], n_threads = a[5];
  const char* fn = sig.fn();
  Matrix M = get_matrix(fn, B);
  check_rows_int32(fn, M.n);
  DoubleArray w = get_weights(fn, weights, M.m);
  const double gamma = get_double(fn, "gamma", a[2]);
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  const bool use = get_dedup(fn, dedup) != 0;  // auto: on (pair work is quadratic in rows)
  const int nt = get_threads(fn, n_threads);

  py::array_t<double> L(static_cast<py::ssize_t>(M.m));
  py::array_t<double> grad(static_cast<py::ssize_t>(M.m));
  double* pL = L.mutable_data();
  double* pg = grad.mutable_data();
  const double* pw = w.data();
  double J = 0.0;
  SignalWatch watch;
  int bad = 0;
  {
    py::gil_scoped_release release;
    bad = bad_byte(M);
    if (bad == 0) {
      aces_fast::RowPlan plan;
      const int64_t* kc = dedup_counts(M, pc, use, plan, nt);
      J = aces_fast::surrogate_loo_auc(M.data, M.n, M.m, pw, gamma, kc, pL, pg, true, nt);
    }
  }
  watch.raise_if_interrupted();
  if (bad != 0) raise_not_binary("", bad);
  return py::make_tuple(L, J, grad);
}

py::object py_aces_o_fit(const FastArgs& args) {
  static const Keywords sig("aces_o_fit", {"B", "logits0", "active", "gamma", "lr", "steps",
                                           "counts", "dedup", "n_threads"});
  py::handle a[9];
  sig.parse(args, a);
  const py::handle B = a[0], counts = a[6], dedup = a[7], n_threads = a[8];
  const char* fn = sig.fn();
  Matrix M = get_matrix(fn, B);
  check_rows_int32(fn, M.n);
  const std::vector<uint8_t> act = get_active(fn, a[2], M.m);
  DoubleArray lg = get_column_vector(fn, "logits0", a[1], M.m);
  const double gamma = get_double(fn, "gamma", a[3]);
  const double lr = get_double(fn, "lr", a[4]);
  const int64_t st = get_steps(fn, a[5]);
  py::object c = get_counts(fn, counts, M.n);
  const int64_t* pc = counts_ptr(c);
  const bool use = get_dedup(fn, dedup) != 0;  // auto: on (steps x quadratic pair work)
  const int nt = get_threads(fn, n_threads);

  py::array_t<double> weights(static_cast<py::ssize_t>(M.m));
  py::array_t<double> objective(static_cast<py::ssize_t>(st + 1));
  double* pw = weights.mutable_data();
  double* po = objective.mutable_data();
  const double* pl = lg.data();
  SignalWatch watch;
  int bad = 0;
  {
    py::gil_scoped_release release;
    bad = bad_byte(M);
    if (bad == 0) {
      aces_fast::RowPlan plan;
      const int64_t* kc = dedup_counts(M, pc, use, plan, nt);
      aces_fast::aces_o_fit(M.data, M.n, M.m, pl, act.data(), gamma, lr, st, kc, pw, po, true, nt);
    }
  }
  watch.raise_if_interrupted();
  if (bad != 0) raise_not_binary("", bad);
  return py::make_tuple(weights, objective);
}

// ---- whole methods ------------------------------------------------------------------

// A 1-D C-contiguous array of exactly dtype T (no conversion: these are views of
// Arrow buffers the caller made); TypeError naming the argument otherwise.
template <typename T>
py::array_t<T> get_exact(const char* fn, const char* name, py::handle h) {
  if (!py::isinstance<py::array_t<T>>(h) ||
      !(py::reinterpret_borrow<py::array>(h).flags() & py::array::c_style) ||
      py::reinterpret_borrow<py::array>(h).ndim() != 1)
    throw py::type_error(std::string(fn) + ": " + name + " must be a 1-D C-contiguous " +
                         py::str(py::dtype::of<T>()).cast<std::string>() + " array, got " +
                         type_name(h));
  return py::reinterpret_borrow<py::array_t<T>>(h);
}

// The method parameters of rerank / rerank_batch from their parsed keywords:
// a[1..9] = method, tie_tol, gamma, lr, steps, top_k, warm, dedup, power (a[0]
// is B or tasks, a[10] n_threads). power (float64 1-D, CodeT's k ** exponent)
// stays owned by the caller's argument, alive for the whole call.
aces_fast::MethodParams get_params(const char* fn, const py::handle* a) {
  const int64_t method = get_int(fn, "method", a[1], std::numeric_limits<int>::min(),
                                 std::numeric_limits<int>::max(), "");
  // an unknown code would leave outputs unallocated that run_method writes
  if (!aces_fast::is_method_code(static_cast<int>(method)))
    throw py::value_error(std::string(fn) + ": unknown method code " + std::to_string(method) +
                          " (see METHOD_CODES)");
  aces_fast::MethodParams p{};
  p.method = static_cast<aces_fast::MethodCode>(method);
  p.tie_tol = get_double(fn, "tie_tol", a[2]);
  p.gamma = get_double(fn, "gamma", a[3]);
  p.lr = get_double(fn, "lr", a[4]);
  p.steps = get_steps(fn, a[5]);
  p.top_k = get_top_k(fn, a[6]);
  p.warm = get_bool(fn, "warm", a[7]);
  p.dedup = get_dedup(fn, a[8]);
  p.power = nullptr;
  p.power_len = 0;
  if (!a[9].is_none()) {
    const py::array_t<double> power = get_exact<double>(fn, "power", a[9]);
    p.power = power.data();
    p.power_len = static_cast<int64_t>(power.shape(0));
  }
  if (p.method == aces_fast::kMethodCodet && p.power == nullptr)
    throw py::value_error(std::string(fn) + ": codet needs power, the float64 table of " +
                          "k ** exponent for k = 0 .. n");
  return p;
}

// CodeT reads power[n] for a task of n rows: ValueError unless the table covers
// the largest of the T tasks (run_codet checks it again, as a task error).
void check_power(const char* fn, const aces_fast::MethodParams& p,
                 const aces_fast::BatchTask* tasks, size_t T) {
  if (p.method != aces_fast::kMethodCodet) return;
  int64_t max_rows = 0;
  for (size_t k = 0; k < T; ++k) max_rows = std::max(max_rows, tasks[k].n);
  if (p.power_len <= max_rows)
    throw py::value_error(std::string(fn) +
                          ": codet's power table needs n + 1 = " + std::to_string(max_rows + 1) +
                          " entries for the largest task, got " + std::to_string(p.power_len));
}

// The Python arrays behind one task's outputs; allocated with the GIL held so
// the method itself can run without it. py::object, not py::array_t: a default
// array_t is a new empty array, and most of these stay unset (3 to 6
// allocations per call that cost about as much as ranking a small task).
struct TaskArrays {
  Matrix M;  // the pass matrix
  py::object scores, weights, loo, objective, order, rows;
};

// A new 1-D array of n T's as `slot` and its data pointer.
template <typename T>
T* new_output(py::object& slot, int64_t n) {
  py::array_t<T> a(static_cast<py::ssize_t>(n));
  T* data = a.mutable_data();
  slot = std::move(a);
  return data;
}

void prepare_task(const char* fn, py::handle B, const aces_fast::MethodParams& p, TaskArrays& a,
                  aces_fast::BatchTask& t) {
  a.M = get_matrix(fn, B);
  const Matrix& M = a.M;
  check_rows_int32(fn, M.n);
  t.B = M.data;
  t.n = M.n;
  t.m = M.m;
  t.out.scores = new_output<double>(a.scores, M.n);
  if (aces_fast::has_test_weights(p.method))
    t.out.weights = new_output<double>(a.weights, M.m);
  else
    a.weights = py::none();
  t.out.order = new_output<int64_t>(a.order, M.n);
  if (p.method == aces_fast::kMethodAcesC || p.method == aces_fast::kMethodAcesCFilter)
    t.out.loo = new_output<double>(a.loo, M.m);
  if (p.method == aces_fast::kMethodAcesO) {
    t.out.objective = new_output<double>(a.objective, p.steps + 1);  // get_steps bounds it
    t.out.rows = new_output<int64_t>(a.rows, aces_fast::top_k_count(M.n, p.top_k));
  }
}

py::tuple task_result(const TaskArrays& a, const aces_fast::BatchTask& t) {
  py::object none = py::none();
  return py::make_tuple(a.scores, a.weights, a.order, t.out.loo ? a.loo : none,
                        py::bool_(t.out.fallback), t.out.objective ? a.objective : none,
                        t.out.rows ? a.rows : none);
}

py::object py_rerank(const FastArgs& args) {
  static const Keywords sig("rerank", {"B", "method", "tie_tol", "gamma", "lr", "steps", "top_k",
                                       "warm", "dedup", "power", "n_threads"});
  py::handle v[11];
  sig.parse(args, v);
  const char* fn = sig.fn();
  const aces_fast::MethodParams p = get_params(fn, v);
  const int nt = get_threads(fn, v[10]);
  TaskArrays a;
  aces_fast::BatchTask t;
  prepare_task(fn, v[0], p, a, t);
  check_power(fn, p, &t, 1);
  SignalWatch watch;
  int bad = 0;
  {
    py::gil_scoped_release release;
    // One workspace per calling thread, reused across calls: a small call then
    // allocates nothing but its outputs. Concurrent Python threads each get
    // their own; run_method frees the big scratch of large tasks itself, so
    // what stays is O(n + m) of the largest small task seen.
    thread_local aces_fast::MethodWorkspace ws;
    // run_method checks the values first (in its dedup pass when it has one);
    // the largest byte, for the message, only when one is bad
    aces_fast::run_method(t.B, t.n, t.m, p, t.out, ws, true, nt);
    if (t.out.not_binary) bad = bad_byte(a.M);
  }
  watch.raise_if_interrupted();
  if (bad != 0) raise_not_binary("", bad);
  return task_result(a, t);
}

// The tasks argument of the batch functions: a list or tuple (not a str or array).
py::sequence get_task_sequence(const char* fn, py::handle tasks) {
  if (!py::isinstance<py::sequence>(tasks) || py::isinstance<py::str>(tasks) ||
      py::isinstance<py::array>(tasks))
    throw py::type_error(std::string(fn) + ": tasks must be a list or tuple of 2-D arrays, got " +
                         type_name(tasks));
  return py::reinterpret_borrow<py::sequence>(tasks);
}

// Runs prepared jobs with the GIL released, then raises the batch's first error
// (a bad byte, Ctrl-C, out of memory, a task's failure), naming the task.
void run_jobs(const char* fn, std::vector<aces_fast::BatchTask>& jobs,
              const std::vector<Matrix>& matrices, const aces_fast::MethodParams& p, int nt) {
  const size_t T = jobs.size();
  SignalWatch watch;
  bool oom = false;
  size_t bad_task = T;
  int bad = 0;
  {
    py::gil_scoped_release release;
    // each task checks its values first, inside run_method (in parallel, in its
    // dedup pass when it has one); the lowest bad index is reported
    oom = aces_fast::run_batch(jobs.data(), T, p, nt);
    for (size_t k = 0; k < T && bad == 0; ++k)
      if (jobs[k].out.not_binary && k < matrices.size()) {
        bad = bad_byte(matrices[k]);
        bad_task = k;
      }
  }
  watch.raise_if_interrupted();
  if (bad != 0) raise_not_binary("task " + std::to_string(bad_task) + ": ", bad);
  if (oom) throw std::bad_alloc();
  for (size_t k = 0; k < T; ++k)
    if (!jobs[k].error.empty())
      throw std::runtime_error(std::string(fn) + ": task " + std::to_string(k) + ": " +
                               jobs[k].error);
}

py::object py_rerank_batch(const FastArgs& args) {
  static const Keywords sig("rerank_batch", {"tasks", "method", "tie_tol", "gamma", "lr", "steps",
                                             "top_k", "warm", "dedup", "power", "n_threads"});
  py::handle v[11];
  sig.parse(args, v);
  const char* fn = sig.fn();
  const aces_fast::MethodParams p = get_params(fn, v);
  const int nt = get_threads(fn, v[10]);
  const py::sequence seq = get_task_sequence(fn, v[0]);
  const size_t T = static_cast<size_t>(py::len(seq));
  std::vector<TaskArrays> arrays(T);
  std::vector<Matrix> matrices(T);
  std::vector<aces_fast::BatchTask> jobs(T);
  for (size_t k = 0; k < T; ++k) {
    // the index goes into every message ("rerank_batch: task 3: B must be 2-D ...")
    const std::string where = std::string(fn) + ": task " + std::to_string(k);
    prepare_task(where.c_str(), seq[k], p, arrays[k], jobs[k]);
    matrices[k] = arrays[k].M;
  }
  check_power(fn, p, jobs.data(), jobs.size());
  run_jobs(fn, jobs, matrices, p, nt);
  py::list result(T);
  for (size_t k = 0; k < T; ++k) result[k] = task_result(arrays[k], jobs[k]);
  return result;
}

// Offsets (T + 1,) int64 of per-task lengths len(k): offsets[k] = sum of len(j<k).
template <typename Len>
py::array_t<int64_t> make_offsets(size_t T, Len len) {
  py::array_t<int64_t> off(static_cast<py::ssize_t>(T + 1));
  int64_t* po = off.mutable_data();
  po[0] = 0;
  for (size_t k = 0; k < T; ++k) po[k + 1] = po[k] + len(k);
  return off;
}

// Allocates the flat outputs of jobs (n and m set, sources set), points every
// job's outputs into them, runs the batch and returns rerank_batch_flat's tuple.
py::tuple run_flat(const char* fn, std::vector<aces_fast::BatchTask>& jobs,
                   const std::vector<Matrix>& matrices, const aces_fast::MethodParams& p, int nt) {
  const size_t T = jobs.size();
  check_power(fn, p, jobs.data(), jobs.size());
  const bool is_c =
      p.method == aces_fast::kMethodAcesC || p.method == aces_fast::kMethodAcesCFilter;
  const bool is_o = p.method == aces_fast::kMethodAcesO;
  const int64_t n_obj = p.steps + 1;  // get_steps bounds it
  py::array_t<int64_t> n_off = make_offsets(T, [&](size_t k) { return jobs[k].n; });
  py::array_t<int64_t> m_off = make_offsets(T, [&](size_t k) { return jobs[k].m; });
  const int64_t* pn = n_off.data();
  const int64_t* pm = m_off.data();
  const py::ssize_t N = static_cast<py::ssize_t>(pn[T]), M = static_cast<py::ssize_t>(pm[T]);
  // the large outputs reuse the memory of earlier calls' (output_pool.hpp)
  const bool has_w = aces_fast::has_test_weights(p.method);
  py::array_t<double> scores = pooled_array<double>(N);
  py::array_t<int64_t> order = pooled_array<int64_t>(N);
  py::object weights = py::none();
  double* pw = nullptr;
  if (has_w) {
    py::array_t<double> a = pooled_array<double>(M);
    pw = a.mutable_data();
    weights = a;
  }
  py::array_t<bool> fallback(static_cast<py::ssize_t>(T));
  py::object loo = py::none(), objective = py::none(), obj_off = py::none(), rows = py::none(),
             rows_off = py::none();
  double* ploo = nullptr;
  double* pobj = nullptr;
  int64_t* prows = nullptr;
  const int64_t* pr = nullptr;
  if (is_c) {
    py::array_t<double> a = pooled_array<double>(M);
    ploo = a.mutable_data();
    loo = a;
  }
  if (is_o) {
    if (static_cast<int64_t>(T) > std::numeric_limits<int64_t>::max() / n_obj)
      throw std::bad_alloc();
    py::array_t<int64_t> oo = make_offsets(T, [&](size_t) { return n_obj; });
    py::array_t<double> a = pooled_array<double>(static_cast<py::ssize_t>(oo.data()[T]));
    pobj = a.mutable_data();
    objective = a;
    obj_off = oo;
    py::array_t<int64_t> ro =
        make_offsets(T, [&](size_t k) { return aces_fast::top_k_count(jobs[k].n, p.top_k); });
    pr = ro.data();
    py::array_t<int64_t> r(static_cast<py::ssize_t>(pr[T]));
    prows = r.mutable_data();
    rows = r;
    rows_off = ro;
  }
  double* ps = scores.mutable_data();
  int64_t* pord = order.mutable_data();
  for (size_t k = 0; k < T; ++k) {
    aces_fast::BatchTask& t = jobs[k];
    t.out.scores = ps + pn[k];
    t.out.order = pord + pn[k];
    if (has_w) t.out.weights = pw + pm[k];
    if (is_c) t.out.loo = ploo + pm[k];
    if (is_o) {
      t.out.objective = pobj + static_cast<int64_t>(k) * n_obj;
      t.out.rows = prows + pr[k];
    }
  }
  run_jobs(fn, jobs, matrices, p, nt);
  bool* pf = fallback.mutable_data();
  for (size_t k = 0; k < T; ++k) pf[k] = jobs[k].out.fallback;
  return py::make_tuple(n_off, m_off, scores, weights, order, loo, fallback, objective, obj_off,
                        rows, rows_off);
}

// rerank_batch_flat on a stack of equal-shape tasks, tasks[k] = the k-th (n, m)
// slice of one 3-D C-contiguous uint8 array: every task points into the one
// buffer, so a batch of small tasks makes no Python view per task (the views
// cost a tenth of ranking a 24 x 100 task) and the tasks lie back to back in
// memory, in the order the look-ahead prefetches them.
py::tuple rerank_stack(const char* fn, py::handle h, const aces_fast::MethodParams& p, int nt) {
  const auto a = py::reinterpret_borrow<py::array>(h);
  if (a.ndim() != 3 || a.dtype().kind() != 'u' || a.itemsize() != 1 ||
      !(a.flags() & py::array::c_style))
    throw py::type_error(std::string(fn) + ": tasks given as one array must be a 3-D " +
                         "C-contiguous uint8 stack (tasks x candidates x tests), got " +
                         std::to_string(a.ndim()) + "-D " + dtype_name(a));
  const size_t T = static_cast<size_t>(a.shape(0));
  const int64_t n = static_cast<int64_t>(a.shape(1)), m = static_cast<int64_t>(a.shape(2));
  if (T > 0 && n == 0) raise_no_rows(std::string(fn) + ": task 0");
  check_rows_int32(fn, n);
  const uint8_t* base = static_cast<const uint8_t*>(a.data());
  std::vector<Matrix> matrices(T);
  std::vector<aces_fast::BatchTask> jobs(T);
  for (size_t k = 0; k < T; ++k) {
    // n * m * k is below the array's size, which numpy keeps within ssize_t
    const uint8_t* B = base + static_cast<int64_t>(k) * n * m;
    matrices[k].data = jobs[k].B = B;
    matrices[k].n = jobs[k].n = n;
    matrices[k].m = jobs[k].m = m;
  }
  return run_flat(fn, jobs, matrices, p, nt);
}

// rerank_batch with the outputs of every task in slices of a few flat arrays
// (Arrow's list layout: values + offsets) instead of one tuple of arrays per
// task: the cost of a small task is then its computation, not the allocation
// of 3 to 6 Python objects.
py::object py_rerank_batch_flat(const FastArgs& args) {
  static const Keywords sig("rerank_batch_flat",
                            {"tasks", "method", "tie_tol", "gamma", "lr", "steps", "top_k", "warm",
                             "dedup", "power", "n_threads"});
  py::handle v[11];
  sig.parse(args, v);
  const char* fn = sig.fn();
  const aces_fast::MethodParams p = get_params(fn, v);
  const int nt = get_threads(fn, v[10]);
  if (py::isinstance<py::array>(v[0])) return rerank_stack(fn, v[0], p, nt);
  const py::sequence seq = get_task_sequence(fn, v[0]);
  const size_t T = static_cast<size_t>(py::len(seq));
  std::vector<Matrix> matrices(T);
  std::vector<aces_fast::BatchTask> jobs(T);
  for (size_t k = 0; k < T; ++k) {
    const py::object task = seq[k];
    try {
      matrices[k] = get_matrix(fn, task);
      check_rows_int32(fn, matrices[k].n);
    } catch (const py::builtin_exception&) {
      // Again with the index in the message ("rerank_batch_flat: task 3: B must be
      // 2-D ..."), which then throws the same error: building that string for
      // every task cost a tenth of a small task's time.
      const std::string where = std::string(fn) + ": task " + std::to_string(k);
      matrices[k] = get_matrix(where.c_str(), task);
      check_rows_int32(where.c_str(), matrices[k].n);
      throw;
    }
    jobs[k].B = matrices[k].data;
    jobs[k].n = matrices[k].n;
    jobs[k].m = matrices[k].m;
  }
  return run_flat(fn, jobs, matrices, p, nt);
}

// rerank_batch_flat on tasks given bit-packed, as in a Parquet batch of the
// pass-matrix layout (docs/parquet.md): task k's rows are the bytes
// data[offsets[k]:offsets[k+1]], n[k] rows of ceil(m[k] / 8) bytes, packed
// big-endian. Each task is unpacked by the thread that runs it, into its
// workspace: no unpacked batch in memory, no Python object per task. A task
// whose padding bits are set is not ranked (its outputs are unspecified) and is
// flagged in the extra last element `padding` (bool, T).
py::object py_rerank_packed(const FastArgs& args) {
  static const Keywords sig(
      "rerank_packed", {"data", "offsets", "n", "m", "method", "tie_tol", "gamma", "lr", "steps",
                        "top_k", "warm", "dedup", "power", "n_threads"});
  py::handle v[14];
  sig.parse(args, v);
  const char* fn = sig.fn();
  const aces_fast::MethodParams p = get_params(fn, v + 3);  // its a[1] is method
  const int nt = get_threads(fn, v[13]);
  const py::array_t<uint8_t> data = get_exact<uint8_t>(fn, "data", v[0]);
  const py::array_t<int64_t> offsets = get_exact<int64_t>(fn, "offsets", v[1]);
  const py::array_t<int64_t> ns = get_exact<int64_t>(fn, "n", v[2]);
  const py::array_t<int64_t> ms = get_exact<int64_t>(fn, "m", v[3]);
  const size_t T = static_cast<size_t>(ns.shape(0));
  if (static_cast<size_t>(ms.shape(0)) != T || static_cast<size_t>(offsets.shape(0)) != T + 1)
    throw py::value_error(std::string(fn) + ": n and m must have one entry per task and offsets " +
                          "one more, got " + std::to_string(ns.shape(0)) + ", " +
                          std::to_string(ms.shape(0)) + " and " + std::to_string(offsets.shape(0)));
  const int64_t size = static_cast<int64_t>(data.shape(0));
  const uint8_t* pd = data.data();
  const int64_t* po = offsets.data();
  std::vector<aces_fast::BatchTask> jobs(T);
  for (size_t k = 0; k < T; ++k) {
    const int64_t n = ns.data()[k], m = ms.data()[k];
    const std::string where = std::string(fn) + ": task " + std::to_string(k) + ": ";
    if (n < 1 || n > std::numeric_limits<int32_t>::max())
      throw py::value_error(where + "n must be in [1, 2**31), got " + std::to_string(n));
    if (m < 0 || m > std::numeric_limits<int32_t>::max())
      throw py::value_error(where + "m must be in [0, 2**31), got " + std::to_string(m));
    const int64_t lo = po[k], hi = po[k + 1];
    if (lo < 0 || hi < lo || hi > size)
      throw py::value_error(where + "offsets [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ") are not inside data (" + std::to_string(size) + " bytes)");
    const int64_t nb = (m + 7) / 8;  // n < 2**31 and nb <= 2**28: n * nb cannot overflow
    if (n * nb != hi - lo)
      throw py::value_error(where + "B has " + std::to_string(hi - lo) + " bytes, need n * " +
                            "ceil(m / 8) = " + std::to_string(n * nb));
    jobs[k].packed = pd + lo;
    jobs[k].n = n;
    jobs[k].m = m;
  }
  py::tuple flat = run_flat(fn, jobs, {}, p, nt);
  py::array_t<bool> padding(static_cast<py::ssize_t>(T));
  bool* pp = padding.mutable_data();
  for (size_t k = 0; k < T; ++k) pp[k] = jobs[k].bad_padding;
  return py::make_tuple(flat[0], flat[1], flat[2], flat[3], flat[4], flat[5], flat[6], flat[7],
                        flat[8], flat[9], flat[10], padding);
}

// Pass@k for every task and k: scores and labels of task t are the slices
// [offsets[t], offsets[t+1]) (labels 0/1 bytes, read only where has_labels[t]);
// result (len(ks), T) float64, nan where has_labels[t] is false. Bit for bit
// aces_fast.pass_at_k (methods/pass_at_k.hpp).
py::object py_pass_at_ks(const FastArgs& args) {
  static const Keywords sig("pass_at_ks",
                            {"scores", "offsets", "labels", "has_labels", "ks", "order"});
  py::handle v[6];
  sig.parse(args, v);
  const char* fn = sig.fn();
  const py::array_t<double> scores = get_exact<double>(fn, "scores", v[0]);
  const py::array_t<int64_t> offsets = get_exact<int64_t>(fn, "offsets", v[1]);
  const py::array_t<uint8_t> labels = get_exact<uint8_t>(fn, "labels", v[2]);
  const py::array_t<bool> has = get_exact<bool>(fn, "has_labels", v[3]);
  const py::array_t<int64_t> ks = get_exact<int64_t>(fn, "ks", v[4]);
  const size_t T = static_cast<size_t>(has.shape(0));
  const int64_t N = static_cast<int64_t>(scores.shape(0));
  if (static_cast<size_t>(offsets.shape(0)) != T + 1 || labels.shape(0) != scores.shape(0))
    throw py::value_error(std::string(fn) + ": need offsets (T + 1,) and labels like scores");
  const int64_t* po = offsets.data();
  if (po[0] != 0 || po[T] != N)
    throw py::value_error(std::string(fn) + ": offsets must run from 0 to len(scores)");
  for (size_t t = 0; t < T; ++t)
    if (po[t + 1] <= po[t])
      throw py::value_error(std::string(fn) + ": task " + std::to_string(t) +
                            " has no candidates (offsets must increase)");
  const size_t K = static_cast<size_t>(ks.shape(0));
  for (size_t i = 0; i < K; ++i)
    if (ks.data()[i] < 1) throw py::value_error(std::string(fn) + ": every k must be >= 1");
  // every task's order (indices within the task), or None
  const int64_t* pord = nullptr;
  py::array_t<int64_t> order;
  if (!v[5].is_none()) {
    order = get_exact<int64_t>(fn, "order", v[5]);
    if (order.shape(0) != scores.shape(0))
      throw py::value_error(std::string(fn) + ": order must be like scores");
    pord = order.data();
    for (size_t t = 0; t < T; ++t) {
      const uint64_t n = static_cast<uint64_t>(po[t + 1] - po[t]);
      bool outside = false;  // (a negative index is a large unsigned one)
      for (int64_t i = po[t]; i < po[t + 1]; ++i) outside |= static_cast<uint64_t>(pord[i]) >= n;
      if (outside)
        throw py::value_error(std::string(fn) + ": task " + std::to_string(t) +
                              ": order holds an index outside the task");
    }
  }
  py::array_t<double> out({static_cast<py::ssize_t>(K), static_cast<py::ssize_t>(T)});
  double* pout = out.mutable_data();
  const double* ps = scores.data();
  const uint8_t* py_ = labels.data();
  const bool* ph = has.data();
  const int64_t* pk = ks.data();
  {
    py::gil_scoped_release release;
    aces_fast::PassScratch scratch;
    std::vector<double> row(K);
    for (size_t t = 0; t < T; ++t) {
      if (ph[t] && pord)
        aces_fast::pass_at_ks_ordered(ps + po[t], py_ + po[t], pord + po[t], po[t + 1] - po[t], pk,
                                      static_cast<int64_t>(K), row.data());
      else if (ph[t])
        aces_fast::pass_at_ks_one(ps + po[t], py_ + po[t], po[t + 1] - po[t], pk,
                                  static_cast<int64_t>(K), row.data(), scratch);
      else
        std::fill(row.begin(), row.end(), std::numeric_limits<double>::quiet_NaN());
      for (size_t i = 0; i < K; ++i) pout[i * T + t] = row[i];
    }
  }
  return out;
}

// The number of leading tasks that are already what the package's pass-matrix
// conversion would return unchanged (exactly numpy.ndarray, 2-D, uint8,
// C-contiguous, n >= 1; aces_fast._validation.as_pass_matrix's fast path), so a
// batch converts in Python only from the first other one: the per-task Python
// check cost about as much as ranking a small task.
py::object py_prepared_prefix(const FastArgs& args) {
  static const Keywords sig("prepared_prefix", {"tasks"});
  py::handle v[1];
  sig.parse(args, v);
  const py::sequence seq = get_task_sequence(sig.fn(), v[0]);
  static PyObject* const ndarray =
      py::object(py::module_::import("numpy").attr("ndarray")).release().ptr();
  const size_t T = static_cast<size_t>(py::len(seq));
  size_t k = 0;
  for (; k < T; ++k) {
    const py::object item = seq[k];
    if (Py_TYPE(item.ptr()) != reinterpret_cast<PyTypeObject*>(ndarray)) break;
    const auto a = py::reinterpret_borrow<py::array>(item);
    if (a.ndim() != 2 || a.shape(0) == 0 || !(a.flags() & py::array::c_style) ||
        a.itemsize() != 1 || a.dtype().kind() != 'u')
      break;
  }
  return py::int_(k);
}

// Docstrings of the functions bound as vectorcall functions: "name(signature)\n--\n\n"
// first, which CPython turns into __text_signature__ (so inspect.signature shows
// the keyword-only parameters), then the text.
const char* const kLooAucDoc =
    "loo_auc($module, /, *, B, weights, counts, tie_tol, dedup, n_threads)\n--\n\n"
    "-> ndarray (m,)\n\n"
    "Leave-one-out AUC of every test: AUC(B @ w - w_j B[:, j], B[:, j]); nan for a\n"
    "column with no passer or no failer (among rows with count > 0).\n"
    "weights=None: uniform integer weights, exact. Float weights (finite, >= 0): with\n"
    "x = s_p - w_j and T = tie_tol * sum(w), a failer f is a win if s_f < x - T and a\n"
    "tie if x - T <= s_f <= x + T.\n"
    "dedup: merge identical rows into one row with a multiplicity first (True/False;\n"
    "None = when the matrix is large enough to repay the hashing pass). Exact either way.";

const char* const kSurrogateDoc =
    "surrogate_loo_auc($module, /, *, B, weights, gamma, counts, dedup, n_threads)\n--\n\n"
    "-> (L (m,), J, grad (m,))\n\n"
    "L_j = mean over pass/fail pairs of sigmoid(gamma (s_p - s_f - w_j)) (nan if a class\n"
    "is empty), J = sum_j w_j (L_j - 1/2) over nonempty columns, grad = dJ/dw.\n"
    "dedup (None = True): merge identical rows first; equal to ~1e-12 (summation order).";

const char* const kAcesOFitDoc =
    "aces_o_fit($module, /, *, B, logits0, active, gamma, lr, steps, counts, dedup, "
    "n_threads)\n--\n\n"
    "-> (weights (m,), objective (steps+1,))\n\n"
    "ACES-O: Adam (PyTorch semantics, betas (0.9, 0.999), eps 1e-8) maximizing\n"
    "J(softmax(logits)) over the active columns; inactive columns get weight 0.\n"
    "objective[t] = J after t updates. No active column: all zeros.\n"
    "dedup (None = True): merge identical rows first; equal to ~1e-12 (summation order).";

#define ACES_FAST_METHOD_DOC                                                                 \
  "method: a code of METHOD_CODES (aces-o with warm=True: init 'aces-c'). gamma, lr,\n"      \
  "steps, top_k (int >= 1 or None: all rows) and warm are ACES-O's (pass them for every\n"   \
  "method); power (float64 1-D, k ** exponent for k = 0 .. n at least, or None) CodeT's,\n"  \
  "whose weights are None (scores: passes of non-constant tests x power[consensus set\n"     \
  "size]; order stable descending). dedup: True/False/None (auto) merges identical rows\n"   \
  "inside the kernels (exact for LOO-AUC and ACES-C; ACES-O to ~1e-12). Returns (scores\n"   \
  "(n,), weights (m,), order (n,) int64, loo_auc (m,) | None, fallback, objective\n"         \
  "(steps+1,) | None, rows (k,) int64 | None): weights sum to 1 (zeros if none), scores =\n" \
  "B w summed in ascending column order with ties within tie_tol * sum(w) snapped to one\n"  \
  "value, order = stable descending. loo_auc for ACES-C, objective and the optimized rows\n" \
  "for ACES-O."

const char* const kRerankDoc =
    "rerank($module, /, *, B, method, tie_tol, gamma, lr, steps, top_k, warm, dedup, "
    "power, n_threads)\n--\n\n"
    "-> tuple\n\n"
    "One ranking method on one pass matrix, GIL released.\n" ACES_FAST_METHOD_DOC;

const char* const kRerankBatchDoc =
    "rerank_batch($module, /, *, tasks, method, tie_tol, gamma, lr, steps, top_k, warm, dedup, "
    "power, n_threads)\n--\n\n"
    "-> list\n\n"
    "rerank() over a list of pass matrices of any shapes in one call: OpenMP across\n"
    "tasks (each task single-threaded; a lone task uses the threads itself), GIL\n"
    "released. Results are identical to rerank() one by one.\n" ACES_FAST_METHOD_DOC;

const char* const kRerankBatchFlatDoc =
    "rerank_batch_flat($module, /, *, tasks, method, tie_tol, gamma, lr, steps, top_k, warm, "
    "dedup, power, n_threads)\n--\n\n"
    "-> (n_offsets, m_offsets, scores, weights, order, loo_auc, fallback, objective,\n"
    "    objective_offsets, rows, rows_offsets)\n\n"
    "rerank_batch() with every task's outputs in slices of flat arrays (Arrow's list\n"
    "layout): task k's scores and order are scores[n_offsets[k]:n_offsets[k+1]] and\n"
    "order[...], its weights and loo_auc weights[m_offsets[k]:m_offsets[k+1]], its\n"
    "objective and rows the slices of objective_offsets / rows_offsets; fallback is a\n"
    "bool array (T,). Offsets are int64 (T+1,); loo_auc is None except for ACES-C,\n"
    "objective, rows and their offsets None except for ACES-O. Values identical to\n"
    "rerank() task by task; the parameters and the schedule are rerank_batch()'s.\n"
    "tasks: a list or tuple of 2-D arrays, or one 3-D C-contiguous uint8 array whose\n"
    "slices are the tasks (no view is made per task).";

const char* const kRerankPackedDoc =
    "rerank_packed($module, /, *, data, offsets, n, m, method, tie_tol, gamma, lr, steps, "
    "top_k, warm, dedup, power, n_threads)\n--\n\n"
    "-> rerank_batch_flat's tuple + (padding,)\n\n"
    "rerank_batch_flat() on bit-packed tasks: task k is n[k] rows of ceil(m[k] / 8) bytes\n"
    "packed big-endian (numpy.packbits), data[offsets[k]:offsets[k+1]] (data uint8,\n"
    "offsets int64 (T+1,), n and m int64 (T,), no conversion). Each task is unpacked by\n"
    "the thread that ranks it. padding: bool (T,), True where a row has a padding bit\n"
    "set; that task's outputs are unspecified. Bad offsets or shapes: ValueError.";

const char* const kPassAtKsDoc =
    "pass_at_ks($module, /, *, scores, offsets, labels, has_labels, ks, order)\n--\n\n"
    "-> ndarray (len(ks), T) float64\n\n"
    "Exact Pass@k (ties at random) of every task t and k in ks: scores (float64) and\n"
    "labels (uint8 0/1) of task t are the slices [offsets[t], offsets[t+1]); nan where\n"
    "has_labels[t] (bool) is False. Bit for bit aces_fast.pass_at_k. order: None, or\n"
    "int64 like scores, task t's candidates by descending score (indices within the\n"
    "task, equal scores adjacent: a ranking's order), read instead of the scores'\n"
    "top k: O(k) per task instead of O(n).";

const char* const kPreparedPrefixDoc =
    "prepared_prefix($module, /, *, tasks)\n--\n\n"
    "-> int\n\n"
    "The number of leading tasks (a list or tuple) that are exactly numpy.ndarray,\n"
    "2-D, uint8, C-contiguous with at least one row: those a batch passes on as they\n"
    "are (their values are checked by the call that ranks them).";

#undef ACES_FAST_METHOD_DOC

PyMethodDef kFunctions[] = {
    {"loo_auc", fastcall_entry<&py_loo_auc>(), METH_FASTCALL | METH_KEYWORDS, kLooAucDoc},
    {"surrogate_loo_auc", fastcall_entry<&py_surrogate>(), METH_FASTCALL | METH_KEYWORDS,
     kSurrogateDoc},
    {"aces_o_fit", fastcall_entry<&py_aces_o_fit>(), METH_FASTCALL | METH_KEYWORDS, kAcesOFitDoc},
    {"rerank", fastcall_entry<&py_rerank>(), METH_FASTCALL | METH_KEYWORDS, kRerankDoc},
    {"rerank_batch", fastcall_entry<&py_rerank_batch>(), METH_FASTCALL | METH_KEYWORDS,
     kRerankBatchDoc},
    {"rerank_batch_flat", fastcall_entry<&py_rerank_batch_flat>(), METH_FASTCALL | METH_KEYWORDS,
     kRerankBatchFlatDoc},
    {"rerank_packed", fastcall_entry<&py_rerank_packed>(), METH_FASTCALL | METH_KEYWORDS,
     kRerankPackedDoc},
    {"pass_at_ks", fastcall_entry<&py_pass_at_ks>(), METH_FASTCALL | METH_KEYWORDS, kPassAtKsDoc},
    {"prepared_prefix", fastcall_entry<&py_prepared_prefix>(), METH_FASTCALL | METH_KEYWORDS,
     kPreparedPrefixDoc},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PYBIND11_MODULE(_core, mod) {
  mod.doc() =
      "aces_fast._core: compiled ACES kernels (LOO-AUC, surrogate LOO-AUC, ACES-O fit) and\n"
      "whole methods (rerank: majority, ACES-C, ACES-O; rerank_batch: many tasks at once).\n\n"
      "Private: the package validates every parameter's meaning before calling in. Every\n"
      "argument is keyword-only and required (no defaults here: they live in the package).\n"
      "B must be a 2-D C-contiguous numpy array of dtype uint8 or bool (used in place)\n"
      "holding only 0 and 1: each call checks the values inside the kernel call (ValueError\n"
      "'B must contain only 0 and 1; found value v', v the largest byte).\n"
      "counts (None or int, length n) are row multiplicities. Every function releases the\n"
      "GIL; n_threads=0 means the OpenMP default. On the main thread a long call looks at\n"
      "Python's signals every 50 ms and stops within about that (Ctrl-C: KeyboardInterrupt).";
  mod.attr("__version__") = ACES_FAST_VERSION;
  aces_fast::bind::init_signal_watch();

  mod.def("has_openmp", &aces_fast::has_openmp, "True if the extension was built with OpenMP.");
  mod.def(
      "simd_level", []() { return std::string(aces_fast::simd_level()); },
      "Instruction set of the hand-vectorized kernels: 'avx512', 'avx2' or 'none' (portable);\n"
      "capped by the environment variable ACES_FAST_SIMD=avx2|none, read once per process.\n"
      "Every level computes bitwise the same results.");
  mod.def(
      "output_pool_bytes", []() { return aces_fast::bind::output_pool::waiting(); },
      "Bytes of freed batch outputs kept for the next batch call's (at most 128 MiB;\n"
      "csrc/bindings/output_pool.hpp).");
  mod.def(
      "output_pool_clear", []() { aces_fast::bind::output_pool::clear(); },
      "Returns the memory of output_pool_bytes to the system.");
  mod.def("max_threads", &aces_fast::max_threads,
          "The most threads a kernel uses with n_threads=0 (omp_get_max_threads(), or 1).");
  mod.def(
      "threads_for_work",
      [](int64_t work, py::handle n_threads) {
        return aces_fast::threads_for_work(work, get_threads("threads_for_work", n_threads));
      },
      py::arg("work"), py::arg("n_threads"),
      "Threads a kernel uses for `work` cells given n_threads (> 0 exactly, <= 0 chosen by\n"
      "the work, at most -n_threads or the OpenMP default); 1 without OpenMP.");

  py::dict codes;
  for (const aces_fast::MethodName& mn : aces_fast::kMethodNames)
    codes[mn.name] = static_cast<int>(mn.code);
  mod.attr("METHOD_CODES") = codes;

  add_functions(mod, kFunctions);
  bind_binned(mod);
  bind_part(mod);
}
