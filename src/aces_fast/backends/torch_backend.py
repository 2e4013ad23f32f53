"""``torch``: the kernels and methods in PyTorch, on the input's device (CPU or CUDA).

Input and output types
----------------------
* A ``torch.Tensor`` pass matrix is validated where it lives and every result
  stays there: ``RerankResult`` arrays (``scores``, ``weights``, ``order``,
  ``loo_auc``, ``objective``, ``info["rows"]``), LOO-AUC values and
  ``SurrogateResult`` fields (``objective`` as a 0-d tensor) are tensors on the
  input's device. A CPU tensor of a NumPy-compatible dtype is validated by
  :func:`aces_fast._validation.as_pass_matrix` (zero-copy for ``uint8``/``bool``).
* Anything else (NumPy arrays, nested lists) is validated by the shared NumPy
  validators, wrapped with ``torch.from_numpy`` (no copy), computed on the CPU,
  and returned as NumPy arrays -- so ``backend="torch"`` is a drop-in for the
  other backends.
* Weights (and ``counts``, ``logits0``) may be NumPy or tensors on any device;
  they are moved to the pass matrix's device.

Dtypes and accuracy
-------------------
Returned floating arrays are float64 and order indices int64. LOO-AUC always
uses exact int64 counting (int64 scores under uniform weights, float64 scores
with the ``tie_tol * sum(w)`` tie rule for float weights) and equals the NumPy
reference bit for bit. The working dtype of the surrogate and of ACES-O's Adam
loop -- the O(steps n^2 m) part, which is where a GPU helps -- is float64 by
default and can be set to float32 (consumer GPUs run float64 up to 64x slower):
``TorchBackend(dtype="float32")`` or the environment variable
``ACES_FAST_TORCH_DTYPE=float32`` read when the backend is first loaded. In
float32 mode results are still returned as float64 but agree with the float64
reference only to ``FLOAT32_RTOL = 1e-4``: relative on surrogate values
``L_j``, absolute times ``sum(w)`` on ``J`` (which can cancel to ~0), absolute
times ``max|grad|`` on the gradient; and to ``FLOAT32_WEIGHT_ATOL = 1e-4``
absolute on ACES-O weights (90 steps, gamma 10). Measured worst cases over
random 5-40 x 5-200 matrices, gamma 1-50: 3e-6, 6e-8, 5e-6 and 2.4e-6. The
tests check these bounds. LOO-AUC and the tie-exact score snapping always run
in exact integer / float64 arithmetic and are unaffected.

Memory and synchronization
--------------------------
Kernels are vectorized across tests and chunked over columns so that no
temporary exceeds ``chunk_elements`` entries (default 2**22, 32 MiB in
float64): LOO-AUC uses (n, k) tensors, the surrogate two (k, U, U) buffers
for U distinct rows (identical rows are merged with multiplicities, which on
real data shrinks ACES-O's top-24 rows to about 6). Host synchronizations
happen only in input validation, a handful of shape-dependent branches (row
de-duplication, empty-input checks), and the final conversion to NumPy; the
Adam loop itself runs without any.

Threads: on the CPU, torch's intra-op thread pool (``torch.set_num_threads``)
applies. For the small matrices of ACES-O, one thread is usually fastest.

Batches: :meth:`TorchBackend.rerank_batch` ranks many tasks (majority vote,
ACES-C, ACES-O) as zero-padded (T, n, m) tensors on one device. Scores ``B w``
and the weight sums are rounded independently of summation order
(:func:`ops.row_scores`, :func:`ops.exact_sum`), so a task's majority / ACES-C
batch results equal its per-task results bit for bit, on any device. Batched
ACES-O runs the same operations with a task axis in front, which changes the
summation order inside the surrogate's matrix products: weights agree with the
per-task path to 1e-9 (measured: at most 1e-15 on random tasks, 7e-11 over
the 164 CodeGen HumanEval tasks, where the per-task path and the NumPy
reference already differ by 4e-11); top-k rows are identical, and so were
the orders on all tested data (scores differing by ~1e-11 can only swap
candidates whose scores nearly tie). As
for every backend, a task with an exact symmetry between tests (e.g. the
identity matrix) sits on an unstable point of ACES-O, where rounding decides
the outcome and no two summation orders need agree.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._validation import as_pass_matrix, as_weights, is_torch_tensor
from ..result import RerankResult, SurrogateResult
from .base import Backend, BackendUnavailableError, codet_method_name

try:
    import torch
    from . import _torch_batch as batch_ops
    from . import _torch_ops as ops
    from ._torch_batch import _host_copy, _pad
    from ._torch_ops import from_numpy
except Exception as exc:  # ImportError, or a broken install failing to load its libraries
    torch = None
    ops = None
    batch_ops = None
    _IMPORT_ERROR: Optional[BaseException] = exc
else:
    _IMPORT_ERROR = None

#: Environment variable choosing the working dtype ("float64" or "float32").
DTYPE_ENV_VAR = "ACES_FAST_TORCH_DTYPE"
#: Documented agreement of float32 mode with the float64 reference.
FLOAT32_RTOL = 1e-4
FLOAT32_WEIGHT_ATOL = 1e-4

#: cap on batched ACES-O's per-step pair tensors on the CPU (8 MiB in float64):
#: measured fastest among 2**17..2**22 for 100 x m real tasks and 200 x 500 ones
CPU_PAIR_ELEMENTS = 1 << 20

_DTYPE_NAMES = ("float64", "float32")
# dtypes torch can hand to NumPy; others (bfloat16, float8) are validated in torch
_NUMPY_COMPATIBLE = (
    () if torch is None else
    (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
     torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128)
)


def _parse_dtype(dtype: Any) -> "torch.dtype":
    if torch is not None and dtype in (torch.float64, torch.float32):
        return dtype
    if isinstance(dtype, str) and dtype.strip().lower() in _DTYPE_NAMES:
        return getattr(torch, dtype.strip().lower())
    raise ValueError(f"torch backend dtype must be 'float64' or 'float32'; got {dtype!r}")


def to_device(x: Any, device: Any, dtype: "torch.dtype") -> "torch.Tensor":
    """A NumPy array, list or tensor (any device) as a tensor on ``device`` in ``dtype``.

    No copy when ``x`` already is such a tensor (or a NumPy array of ``dtype``
    and ``device`` is the CPU).
    """
    if is_torch_tensor(x):
        return x.detach().to(device=device, dtype=dtype)
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        # torch.from_numpy rejects negative strides and non-native byte order
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        return from_numpy(x).to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def to_output(x: Any, numpy_out: bool) -> Any:
    """A result tensor as the caller's array type: NumPy (via the CPU) or unchanged."""
    if x is None or not numpy_out:
        return x
    return x.detach().cpu().numpy()


class TorchBackend(Backend):
    """PyTorch backend; see the module docstring for types, dtypes and memory.

    Parameters
    ----------
    dtype : {"float64", "float32"} or torch dtype
        Working dtype of the surrogate and ACES-O loop (default float64).
    chunk_elements : int, optional
        Cap on the entries of the largest per-chunk temporary (default 2**22).
    """

    name = "torch"

    def __init__(self, dtype: Any = "float64", chunk_elements: Optional[int] = None):
        self.dtype = _parse_dtype(dtype)
        if chunk_elements is None:
            chunk_elements = ops.DEFAULT_CHUNK_ELEMENTS
        if int(chunk_elements) < 1:
            raise ValueError(f"chunk_elements must be >= 1; got {chunk_elements}")
        self.chunk_elements = int(chunk_elements)

    # -- conversions -------------------------------------------------------------

    def prepare(self, B: Any) -> Any:
        """Validate a pass matrix: a tensor stays a (uint8) tensor on its device,
        anything else becomes the validated NumPy ``uint8`` array (outputs NumPy)."""
        if not is_torch_tensor(B):
            return as_pass_matrix(B)
        if B.device.type == "cpu" and B.dtype in _NUMPY_COMPATIBLE:
            return from_numpy(as_pass_matrix(B))
        return ops.check_pass_tensor(B)

    def prepare_weights(self, w: Any, m: int) -> Any:
        """Validate weights: a tensor stays a float64 tensor on its device, else NumPy float64."""
        if not is_torch_tensor(w):
            return as_weights(w, m)
        if w.device.type == "cpu" and w.dtype in _NUMPY_COMPATIBLE:
            return from_numpy(as_weights(w, m))
        return ops.check_weights_tensor(w, m)

    def _matrix(self, B: Any) -> Tuple["torch.Tensor", bool]:
        """``(uint8 tensor, numpy_out)`` for a prepared matrix (NumPy array or tensor)."""
        numpy_out = not is_torch_tensor(B)
        t = from_numpy(np.ascontiguousarray(B)) if numpy_out else B
        if t.dtype == torch.bool:
            t = t.view(torch.uint8)
        return t, numpy_out

    def _vector(self, x: Any, like: "torch.Tensor", dtype: "torch.dtype"
                ) -> Optional["torch.Tensor"]:
        return None if x is None else to_device(x, like.device, dtype)

    # -- kernels (accept NumPy or tensors; output type mirrors B) -------------------

    def loo_auc(self, B, weights, tie_tol, counts=None):
        Bt, numpy_out = self._matrix(B)
        L = ops.loo_auc(Bt, self._vector(weights, Bt, torch.float64), tie_tol,
                        self._vector(counts, Bt, torch.int64), self.chunk_elements)
        return to_output(L, numpy_out)

    def _surrogate(self, Bt, weights, gamma, counts=None):
        L, J, g = ops.surrogate(Bt, self._vector(weights, Bt, self.dtype), gamma,
                                self._vector(counts, Bt, torch.int64), self.dtype,
                                self.chunk_elements)
        return L.to(torch.float64), J.to(torch.float64), g.to(torch.float64)

    def surrogate(self, B, weights, gamma, counts=None):
        Bt, numpy_out = self._matrix(B)
        L, J, g = self._surrogate(Bt, weights, gamma, counts)
        return (to_output(L, numpy_out), float(J) if numpy_out else J,
                to_output(g, numpy_out))

    def _aces_o_fit(self, Bt, logits0, active, gamma, lr, steps, counts=None):
        w, obj = ops.aces_o_fit(Bt, self._vector(logits0, Bt, torch.float64),
                                self._vector(active, Bt, torch.bool), gamma, lr, steps,
                                self._vector(counts, Bt, torch.int64), self.dtype,
                                self.chunk_elements)
        return w.to(torch.float64), obj.to(torch.float64)

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None):
        Bt, numpy_out = self._matrix(B)
        w, obj = self._aces_o_fit(Bt, logits0, active, gamma, lr, steps, counts)
        return to_output(w, numpy_out), to_output(obj, numpy_out)

    def row_scores(self, B, w):
        """``B @ w`` in float64, each row summed left to right (:func:`ops.row_scores`)."""
        Bt, numpy_out = self._matrix(B)
        return to_output(ops.row_scores(Bt, self._vector(w, Bt, torch.float64),
                                        self.chunk_elements), numpy_out)

    def info(self) -> dict:
        return {"torch": torch.__version__, "dtype": str(self.dtype).replace("torch.", ""),
                "cuda": torch.cuda.is_available(), "threads": torch.get_num_threads()}

    # -- method glue on tensors (mirrors base.Backend's NumPy glue) ---------------

    def _result(self, scores, weights, method, numpy_out, **extra) -> RerankResult:
        order = ops.descending_order(scores)
        for key in ("loo_auc", "objective"):
            extra[key] = to_output(extra.get(key), numpy_out)
        info = extra.pop("info", {})
        if "rows" in info:
            info = {**info, "rows": to_output(info["rows"], numpy_out)}
        return RerankResult(scores=to_output(scores, numpy_out),
                            weights=to_output(weights, numpy_out),
                            order=to_output(order, numpy_out), method=method,
                            backend=self.name, info=info, **extra)

    def _weighted_result(self, Bt, w, method, tie_tol, numpy_out, **extra) -> RerankResult:
        # order-independent sums (ops.exact_sum, ops.row_scores): the batch path
        # (rerank_batch) gets these exact bits from padded tensors
        w = ops.normalized(w)
        tol = tie_tol * float(ops.exact_sum(w))
        scores = ops.snap_ties(ops.row_scores(Bt, w, self.chunk_elements), tol)
        return self._result(scores, w, method, numpy_out, **extra)

    def _aces_c_weights(self, Bt, variant, tie_tol):
        L = ops.loo_auc(Bt, None, tie_tol, None, self.chunk_elements)
        n_rows = torch.full((1,), Bt.shape[0], dtype=torch.float64, device=Bt.device)
        w = ops.aces_c_weights(L, Bt.sum(dim=0, dtype=torch.int64), n_rows,
                               variant == "weighted")
        fallback = not bool((w > 0).any())
        if fallback:
            w = ops.nonconstant_mask(Bt).to(torch.float64)
        return w, L, fallback

    def majority_vote(self, B, tie_tol: float = 1e-9) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        w = ops.nonconstant_mask(Bt).to(torch.float64)
        return self._weighted_result(Bt, w, "majority", tie_tol, numpy_out)

    def aces_c_weights(self, B, variant, tie_tol):
        Bt, numpy_out = self._matrix(B)
        w, L, fallback = self._aces_c_weights(Bt, variant, tie_tol)
        return to_output(w, numpy_out), to_output(L, numpy_out), fallback

    def aces_c(self, B, variant: str = "weighted", tie_tol: float = 1e-9) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        w, L, fallback = self._aces_c_weights(Bt, variant, tie_tol)
        method = "aces-c" if variant == "weighted" else "aces-c-filter"
        return self._weighted_result(Bt, w, method, tie_tol, numpy_out, loo_auc=L,
                                     fallback=fallback, info={"variant": variant})

    def aces_o(self, B, gamma, lr, steps, top_k, init, tie_tol: float = 1e-9) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        active = ops.nonconstant_mask(Bt)
        logits0 = torch.zeros(Bt.shape[1], dtype=torch.float64, device=Bt.device)
        if init == "aces-c":
            wc, _, _ = self._aces_c_weights(Bt, "weighted", tie_tol)
            logits0 = torch.where(active, torch.log(ops.normalized(wc) + 1e-3), logits0)
        rows = ops.top_k_rows(Bt, top_k)
        Bk = Bt if rows.shape[0] == Bt.shape[0] else Bt[rows].contiguous()
        w, objective = self._aces_o_fit(Bk, logits0, active, gamma, lr, steps)
        info = {"gamma": gamma, "lr": lr, "steps": steps, "top_k": top_k, "init": init,
                "rows": rows}
        method = "aces-o-warm" if init == "aces-c" else "aces-o"
        return self._weighted_result(Bt, w, method, tie_tol, numpy_out,
                                     objective=objective, info=info)

    def codet(self, B, exponent: float) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        scores = ops.codet_scores(Bt, exponent)
        return self._result(scores, None, codet_method_name(exponent), numpy_out,
                            info={"exponent": exponent})

    def b4(self, B, alpha: float, beta0: float) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        scores = ops.b4_scores(Bt, alpha, beta0)
        return self._result(scores, None, "b4", numpy_out,
                            info={"alpha": alpha, "beta0": beta0})

    # -- many tasks at once ----------------------------------------------------------

    def rerank_batch(self, Bs: Sequence[Any], method: str, params: Dict[str, Any],
                     n_threads: Optional[int]) -> Optional[List[RerankResult]]:
        """Majority vote, ACES-C (both variants) and ACES-O for many tasks in padded batches.

        The protocol of :mod:`aces_fast.batch`. Tasks (all on one device; NumPy
        inputs count as the CPU) are sorted by shape and grouped into chunks of
        at most ``chunk_elements`` padded cells ``T n_max m_max``; each chunk is
        one zero-padded (T, n_max, m_max) ``uint8`` tensor ranked with every step
        vectorized over tasks and tests -- no Python loop over tasks (only the
        padding copies and the final split into results are per task):

        * majority / ACES-C: :func:`batch_ops.rerank_padded` (LOO-AUC, weights,
          scores, tie snapping, orders).
        * ACES-O (``"aces-o"``, ``"aces-o-warm"``, either ``init``):
          :func:`batch_ops.aces_o_padded` -- active tests, warm start, top-k rows
          merged to distinct rows, the Adam loop, normalization, scores of all
          rows, tie snapping, orders. Python loops run only over Adam steps and
          over groups of tasks with similar (distinct top-k rows U, tests m):
          a group's two per-step pair tensors (T', tests, U', U') hold at most
          ``chunk_elements`` entries (on the CPU at most ``CPU_PAIR_ELEMENTS``,
          which run faster in cache), split over tests if one task needs more.

        A task whose own ``n m`` exceeds ``chunk_elements`` runs through the
        per-task method (which chunks over tests). Results mirror each task's
        input type; they equal :meth:`majority_vote` / :meth:`aces_c` task by
        task bit for bit, and :meth:`aces_o` up to summation order in the
        surrogate (weights to 1e-9, see the module docstring; same top-k rows).
        ``n_threads`` sets torch's (process-wide) intra-op thread count for the
        call on the CPU and restores it afterwards (majority / ACES-C results do
        not depend on it; ACES-O's were identical for 1 and 2 threads on the
        real data, though BLAS need not promise it). Returns ``None`` for CodeT
        and B4 (the caller loops over tasks). Cost O(sum over chunks of
        T n_max m_max), plus for ACES-O O(T K m log K) to find distinct rows and
        O(steps sum_t U_t^2 m_t) (up to group padding) for the Adam loop, plus
        one copy per task to pad.
        """
        if method not in _BATCH_METHODS:
            return None
        tie_tol = float(params.get("tie_tol", 1e-9))
        mats = [self._matrix(B) for B in Bs]
        if not mats:
            return []
        device = mats[0][0].device
        for t, (Bt, _) in enumerate(mats):
            if Bt.device != device:
                raise ValueError(f"task {t}: the pass matrix is on device '{Bt.device}' but task 0 "
                                 f"is on '{device}'; a torch batch runs on one device: move "
                                 "every task there first")
        shapes = [tuple(Bt.shape) for Bt, _ in mats]
        with _intra_op_threads(n_threads if device.type == "cpu" else None):
            results: List[Optional[RerankResult]] = [None] * len(mats)
            for chunk in batch_ops.shape_chunks(shapes, self.chunk_elements):
                if len(chunk) == 1 and mats[chunk[0]][0].numel() > self.chunk_elements:
                    t = chunk[0]  # too big to pad: the per-task path chunks over tests
                    results[t] = self._rerank_one(mats[t][0], method, params, mats[t][1])
                elif method in _ACES_O_METHODS:
                    self._aces_o_chunk([mats[t] for t in chunk], chunk, params, results)
                else:
                    self._rerank_chunk([mats[t] for t in chunk], chunk, method, tie_tol, results)
        return results  # type: ignore[return-value]

    def _rerank_one(self, Bt, method, params, numpy_out) -> RerankResult:
        B = to_output(Bt, numpy_out)
        tie_tol = float(params.get("tie_tol", 1e-9))
        if method == "majority":
            return self.majority_vote(B)
        if method in _ACES_O_METHODS:
            return self.aces_o(B, params["gamma"], params["lr"], params["steps"],
                               params["top_k"], params["init"], tie_tol)
        return self.aces_c(B, "weighted" if method == "aces-c" else "filter", tie_tol)

    def _rerank_chunk(self, mats, index, method, tie_tol, results) -> None:
        """Pad ``mats`` ((tensor, numpy_out) pairs), rank them, store results at ``index``."""
        padded, n_rows = _pad([Bt for Bt, _ in mats])
        out = batch_ops.rerank_padded(padded, n_rows, method,
                                      1e-9 if method == "majority" else tie_tol,
                                      self.chunk_elements)
        host = _host_copy(out, mats)
        fallback = out["fallback"].tolist() if "fallback" in out else None
        for k, (Bt, numpy_out) in enumerate(mats):
            n, m = Bt.shape
            arrays = host if numpy_out else out
            common = dict(scores=arrays["scores"][k, :n], weights=arrays["weights"][k, :m],
                          order=arrays["order"][k, :n], backend=self.name)
            if method == "majority":
                results[index[k]] = RerankResult(method=method, **common)
            else:
                variant = "weighted" if method == "aces-c" else "filter"
                results[index[k]] = RerankResult(
                    method=method, loo_auc=arrays["loo_auc"][k, :m], fallback=fallback[k],
                    info={"variant": variant}, **common)

    def _pair_elements(self, device) -> int:
        """Budget of ACES-O's per-step pair tensors: ``chunk_elements``, capped on
        the CPU at ``CPU_PAIR_ELEMENTS``, where tensors that stay in cache run faster
        (a GPU wants them large)."""
        if device.type == "cpu":
            return min(self.chunk_elements, CPU_PAIR_ELEMENTS)
        return self.chunk_elements

    def _aces_o_chunk(self, mats, index, params, results) -> None:
        """ACES-O on ``mats`` padded into one batch; results stored at ``index``."""
        padded, n_rows = _pad([Bt for Bt, _ in mats])
        gamma, lr, steps, top_k, init = (params[key] for key in
                                         ("gamma", "lr", "steps", "top_k", "init"))
        out = batch_ops.aces_o_padded(padded, n_rows, [Bt.shape[1] for Bt, _ in mats], gamma,
                                      lr, steps, top_k, init == "aces-c",
                                      float(params.get("tie_tol", 1e-9)), self.dtype,
                                      self.chunk_elements, self._pair_elements(padded.device))
        host = _host_copy(out, mats)
        method = "aces-o-warm" if init == "aces-c" else "aces-o"
        for k, (Bt, numpy_out) in enumerate(mats):
            n, m = Bt.shape
            arrays = host if numpy_out else out
            kept = n if top_k is None else min(n, top_k)
            info = {"gamma": gamma, "lr": lr, "steps": steps, "top_k": top_k, "init": init,
                    "rows": arrays["rows"][k, :kept]}
            results[index[k]] = RerankResult(
                scores=arrays["scores"][k, :n], weights=arrays["weights"][k, :m],
                order=arrays["order"][k, :n], method=method, backend=self.name,
                objective=arrays["objective"][k], info=info)

    def loo_auc_public(self, B, weights, tie_tol):
        return self.loo_auc(B, weights, tie_tol)

    def surrogate_public(self, B, weights, gamma) -> SurrogateResult:
        return SurrogateResult(*self.surrogate(B, weights, gamma))


#: methods with a padded batch path (CodeT and B4 run task by task)
_ACES_O_METHODS = ("aces-o", "aces-o-warm")
_BATCH_METHODS = ("majority", "aces-c", "aces-c-filter") + _ACES_O_METHODS
_threads_lock = threading.Lock()


@contextlib.contextmanager
def _intra_op_threads(n_threads: Optional[int]):
    """Run the block with torch's intra-op thread count set to ``n_threads`` (None:
    unchanged), restored afterwards; serialized because the setting is process-wide."""
    if n_threads is None:
        yield
        return
    with _threads_lock:
        previous = torch.get_num_threads()
        torch.set_num_threads(n_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


def load() -> Backend:
    """The torch backend, working dtype from ``ACES_FAST_TORCH_DTYPE`` (default float64)."""
    if torch is None:
        if isinstance(_IMPORT_ERROR, ImportError):
            reason = "torch is not installed (pip install aces_fast[torch])"
        else:
            reason = f"torch failed to import: {_IMPORT_ERROR!r}"
        raise BackendUnavailableError("torch", reason)
    dtype = os.environ.get(DTYPE_ENV_VAR) or "float64"
    try:
        return TorchBackend(dtype=dtype)
    except ValueError:
        raise BackendUnavailableError(
            "torch", f"{DTYPE_ENV_VAR}={dtype!r} is not 'float64' or 'float32'") from None
