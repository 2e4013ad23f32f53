"""The benchmark matrix: which cells exist, what each one calls, and why a cell
cannot run here.

A :class:`Case` is one operation x workload family x size x implementation x
threads cell (and a repetition index, see :func:`all_cases`). Three kinds:

* ``call`` -- one call of an operation on a synthetic matrix (``distinct`` or
  ``dup-heavy``, :mod:`.workloads`) of a size ``NxM``; the median time per call;
* ``real`` -- the operation on every problem of a bundled HumanEval dataset, one
  call per problem; the per-problem latency distribution (median and p99 over
  problems);
* ``batch`` -- one :func:`aces_fast.rerank_batch` call on :data:`BATCH_TASKS`
  different ``200x500`` matrices; tasks per second.

Implementations: every aces_fast backend and, in the same group, the operation's
baseline (``numpy-rankdata`` for LOO-AUC and ACES-C, ``torch-autograd`` for
ACES-O, :mod:`.baselines`); batch cells run the backends that have a batch path.

Device cells (``aces-fast bench --device cuda``, :func:`device_cases`): the
``torch-cuda`` implementation -- the torch backend on CUDA tensors, inputs moved
to the device once before any timing, every timed call followed by
``torch.cuda.synchronize()`` -- next to ``cpp`` on all of the host's cores, in
one group per operation, family and size (:data:`CUDA_SIZES`; batch cells on
:data:`CUDA_BATCH_TASKS` tasks), so each cpp / cuda ratio is measured side by
side.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import workloads
from .runtime import backend_unavailable_reason, device_unavailable_reason

#: per-call operation -> (description, baseline implementation)
CALL_OPS: dict[str, tuple[str, str]] = {
    "loo-auc": ("LOO-AUC, uniform weights", "numpy-rankdata"),
    "loo-auc-weighted": ("LOO-AUC, float weights", "numpy-rankdata"),
    "aces-c": ("ACES-C", "numpy-rankdata"),
    "aces-o": ("ACES-O, top_k=24, 90 steps", "torch-autograd"),
    "aces-o-all": ("ACES-O, top_k=None, 90 steps", "torch-autograd"),
}
#: batch operation -> (description, method given to rerank_batch)
BATCH_OPS: dict[str, tuple[str, str]] = {
    "batch-aces-c": ("rerank_batch ACES-C", "aces-c"),
    "batch-aces-o": ("rerank_batch ACES-O, top_k=24, 90 steps", "aces-o"),
}
OPS: tuple[str, ...] = tuple(CALL_OPS) + tuple(BATCH_OPS)
#: the streaming cells' operation (benchmarks/test_bench_stream.py: rerank-dataset
#: on a synthetic Parquet file, not a matrix cell: no family or size of its own)
STREAM_OP = "stream"
#: what --ops / --bench-ops accept
SELECTABLE_OPS: tuple[str, ...] = (*OPS, STREAM_OP)
SIZES: tuple[str, ...] = ("24x100", "200x500", "2000x1000", "20000x1000")
#: tasks per batch cell, and their shape
BATCH_TASKS = 200
BATCH_SIZE = "200x500"
BACKENDS: tuple[str, ...] = ("cpp", "numba", "torch", "numpy")
#: backends with a whole-batch path in rerank_batch (numpy runs tasks one by one)
BATCH_BACKENDS: tuple[str, ...] = ("cpp", "numba", "torch")
BASELINES: tuple[str, ...] = ("numpy-rankdata", "torch-autograd")
IMPLS: tuple[str, ...] = BACKENDS + BASELINES
THREADS: tuple[int, ...] = (1, 2)
#: devices of ``--device``; ``cuda`` runs :func:`device_cases` instead of :func:`all_cases`
DEVICES: tuple[str, ...] = ("cpu", "cuda")
#: implementations that run on an accelerator, and the torch device each puts its
#: inputs on (the tests point it at ``cpu`` to exercise the same code without a GPU)
DEVICE_IMPLS: tuple[str, ...] = ("torch-cuda",)
TORCH_DEVICE: dict[str, str] = {"torch-cuda": "cuda"}
#: what a device run compares: the device implementations and cpp on all host cores
CUDA_IMPLS: tuple[str, ...] = ("cpp", *DEVICE_IMPLS)
#: synthetic sizes of each per-call operation in a device run (the GPU goals read
#: LOO-AUC at 100000x2000, ACES-O top_k=None at 2000x1000, ACES-C at 200x500)
CUDA_SIZES: dict[str, tuple[str, ...]] = {
    "loo-auc": ("200x500", "20000x1000", "100000x2000"),
    "loo-auc-weighted": ("200x500", "20000x1000", "100000x2000"),
    "aces-c": ("200x500", "2000x1000"),
    "aces-o": ("200x500", "2000x1000"),
    "aces-o-all": ("200x500", "2000x1000"),
}
#: tasks of each batch cell in a device run (the issue's goals: 2000 ACES-C tasks)
CUDA_BATCH_TASKS: dict[str, int] = {"batch-aces-c": 2000, "batch-aces-o": 200}
#: every size a run may name (``--sizes``): the CPU matrix's and the device run's
ALL_SIZES: tuple[str, ...] = (*SIZES, "100000x2000")
ACES_O_STEPS = 90
ACES_O_TOP_K = 24
#: cells with at least this many candidates are ``slow``
SLOW_ROWS = 2000
#: cells estimated to take longer than this (seconds per timed call) are ``slow``;
#: a real cell's timed unit is a sweep over all problems
SLOW_CALL_S = 2.0
SLOW_SWEEP_S = 10.0

#: Rough single-thread throughput of a whole ACES-O run in (passer, failer, test)
#: triples per step per second, measured on distinct-row 200x500 matrices on a
#: 2-core AMD EPYC (equal rows make cpp and numba faster); the NumPy reference
#: also pays :data:`_NUMPY_STEP_TEST_S` per step and test (a Python loop). Used
#: only to mark cells slow and to skip calls far over a time budget.
_PAIR_RATE = {
    "cpp": 5e8,
    "numba": 6e8,
    "torch": 4e7,
    "numpy": 5e7,
    "torch-autograd": 1.2e7,
    # a guess for one H100/H200, used only to mark cells slow
    "torch-cuda": 2e10,
}
_NUMPY_STEP_TEST_S = 3.5e-5
#: fixed cost per Adam step (operator dispatch, autograd graph; kernel launches
#: and host syncs on CUDA: 163 ms for 91 steps on an H200, issue 22), seconds
_STEP_S = {"torch": 1.5e-4, "torch-autograd": 5e-4, "torch-cuda": 1.8e-3}
#: The pair tensor of the autograd baseline may use at most this share of RAM.
_MEM_SHARE = 0.25


@dataclass(frozen=True)
class Case:
    """One cell of the matrix (``rep``: which repetition of it, see :func:`all_cases`)."""

    op: str
    family: str
    size: str
    impl: str
    threads: int
    rep: int = 0
    device: str = "cpu"

    @property
    def kind(self) -> str:
        """``"batch"``, ``"real"`` or ``"call"``."""
        if self.op in BATCH_OPS:
            return "batch"
        return "real" if self.family == "real" else "call"

    @property
    def tasks(self) -> int:
        """Tasks of a batch cell (:data:`CUDA_BATCH_TASKS` in a device run)."""
        return CUDA_BATCH_TASKS.get(self.op, BATCH_TASKS) if self.device != "cpu" else BATCH_TASKS

    @property
    def shape(self) -> tuple[int, int] | None:
        """``(n, m)`` of a synthetic matrix; ``None`` for a real dataset."""
        return None if self.family == "real" else parse_size(self.size)

    @property
    def cell(self) -> tuple[str, str, str, str, int]:
        """The cell without the repetition: ``(op, family, size, impl, threads)``."""
        return (self.op, self.family, self.size, self.impl, self.threads)

    @property
    def group(self) -> str:
        """pytest-benchmark group: operation x family x size x threads (the
        implementations of a group compete side by side)."""
        return f"{self.op} {self.family} {self.size} {self.threads}t"

    @property
    def id(self) -> str:
        rep = f"-r{self.rep}" if self.rep else ""
        return f"{self.op}-{self.family}-{self.size}-{self.impl}-{self.threads}t{rep}"

    @property
    def is_baseline(self) -> bool:
        return self.impl in BASELINES

    @property
    def slow(self) -> bool:
        """Left out of a quick run: 2 000 rows or more, or a long estimated call."""
        shape = self.shape
        limit = SLOW_SWEEP_S if self.kind == "real" else SLOW_CALL_S
        return (shape is not None and shape[0] >= SLOW_ROWS) or estimate_seconds(self) > limit


def parse_size(text: str) -> tuple[int, int]:
    """``"200x500"`` -> ``(200, 500)``; ValueError for anything else."""
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ValueError(f"a size looks like 200x500 (candidates x tests); got {text!r}")
    return int(match.group(1)), int(match.group(2))


def impls_for(op: str) -> tuple[str, ...]:
    """The implementations competing in an operation's groups."""
    if op in BATCH_OPS:
        return BATCH_BACKENDS
    return (*BACKENDS, CALL_OPS[op][1])


def threads_for(op: str, family: str, size: str, impl: str) -> tuple[int, ...]:
    """Thread counts of a cell: one only for the NumPy reference (pure Python
    loops), the smallest size and the real problems (too small to split)."""
    if impl == "numpy" or family == "real" or size == SIZES[0]:
        return (1,)
    return THREADS


def all_cases(
    ops: Sequence[str] = OPS,
    families: Sequence[str] = workloads.FAMILIES,
    sizes: Sequence[str] | None = None,
    impls: Sequence[str] | None = None,
    threads: Sequence[int] | None = None,
    reps: int = 1,
) -> list[Case]:
    """Every cell of the matrix restricted to the given axes, ``reps`` times.

    Order: group by group (operation, family, size, threads); inside a group the
    repetitions one after another, each running every implementation. Run in
    this order, load changes on a shared machine hit all implementations of a
    group alike and every repetition yields a ratio measured side by side.
    ``sizes`` filters synthetic sizes (and batch shapes); ``real`` cells have
    dataset names as sizes and are kept unless ``families`` drops ``real``.
    """
    out: list[Case] = []
    for op in ops:
        for family in families:
            if op in BATCH_OPS:
                if family == "real":
                    continue
                op_sizes: tuple[str, ...] = (BATCH_SIZE,)
            else:
                op_sizes = workloads.REAL_DATASETS if family == "real" else SIZES
            for size in op_sizes:
                if sizes is not None and family != "real" and size not in sizes:
                    continue
                chosen = [i for i in impls_for(op) if impls is None or i in impls]
                counts = sorted({t for i in chosen for t in threads_for(op, family, size, i)})
                for t in counts:
                    if threads is not None and t not in threads:
                        continue
                    for rep in range(reps):
                        out += [
                            Case(op, family, size, i, t, rep)
                            for i in chosen
                            if t in threads_for(op, family, size, i)
                        ]
    return out


def host_cores() -> int:
    """The cores this process may run on (what "cpp on all of the host's cores" uses)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def device_cases(
    ops: Sequence[str] = OPS,
    families: Sequence[str] = workloads.SYNTHETIC,
    sizes: Sequence[str] | None = None,
    impls: Sequence[str] | None = None,
    reps: int = 1,
    cores: int | None = None,
    device: str = "cuda",
) -> list[Case]:
    """The cells of a device run: per operation, synthetic family and size
    (:data:`CUDA_SIZES`, batches at :data:`BATCH_SIZE`), ``cpp`` on ``cores``
    threads (default: all of the host's) and every device implementation, in
    one group, the repetitions interleaved as in :func:`all_cases`. The real
    family has no device cells (one small call per problem measures launch
    latency, which the ACES-C 200x500 cell already does)."""
    cores = host_cores() if cores is None else cores
    chosen = [i for i in CUDA_IMPLS if impls is None or i in impls]
    out: list[Case] = []
    for op in ops:
        for family in families:
            if family == "real":
                continue
            op_sizes = (BATCH_SIZE,) if op in BATCH_OPS else CUDA_SIZES[op]
            for size in op_sizes:
                if sizes is not None and size not in sizes:
                    continue
                for rep in range(reps):
                    out += [Case(op, family, size, i, cores, rep, device) for i in chosen]
    return out


# ---------------------------------------------------------------------------
# what a cell calls


def _to_device(x: np.ndarray, device: str) -> Any:
    """``x`` as a torch tensor on ``device`` (once per cell, before any timing)."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(x)).to(device)


def _synchronize(device: str) -> None:
    """Wait for the device's queued work, so a timed call includes it."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _device_call(op: str, impl: str, B: Any, w: np.ndarray | None) -> Callable[[], Any]:
    """``op`` with the torch backend on tensors already on ``TORCH_DEVICE[impl]``,
    each call ending with :func:`_synchronize`."""
    import aces_fast as af

    device = TORCH_DEVICE[impl]
    call: Callable[[], Any]
    if op in BATCH_OPS:
        method = BATCH_OPS[op][1]
        tasks = [_to_device(b, device) for b in B]

        def call() -> Any:
            return af.rerank_batch(tasks, method, backend="torch")
    else:
        Bt = _to_device(B, device)
        top_k = None if op == "aces-o-all" else ACES_O_TOP_K
        if op == "loo-auc":

            def call() -> Any:
                return af.loo_auc(Bt, backend="torch")
        elif op == "loo-auc-weighted":
            wt = _to_device(np.asarray(w, dtype=np.float64), device)

            def call() -> Any:
                return af.loo_auc(Bt, wt, backend="torch")
        elif op == "aces-c":

            def call() -> Any:
                return af.aces_c(Bt, backend="torch")
        else:

            def call() -> Any:
                return af.aces_o(Bt, steps=ACES_O_STEPS, top_k=top_k, backend="torch")

    def timed() -> Any:
        out = call()
        _synchronize(device)
        return out

    return timed


def make_call(
    op: str, impl: str, B: Any, w: np.ndarray | None = None, threads: int | None = None
) -> Callable[[], Any]:
    """A zero-argument callable running per-call ``op`` with ``impl`` on ``(B, w)``,
    or batch ``op`` on the task list ``B`` with ``threads`` threads."""
    if impl in DEVICE_IMPLS:
        if op not in OPS:
            raise ValueError(f"unknown operation {op!r}; choose from {', '.join(OPS)}")
        return _device_call(op, impl, B, w)
    if op in BATCH_OPS:
        if impl not in BACKENDS:
            raise ValueError(f"implementation {impl!r} has no batch path")
        import aces_fast as af

        method = BATCH_OPS[op][1]
        tasks = list(B)
        return lambda: af.rerank_batch(tasks, method, backend=impl, n_threads=threads)
    if op not in CALL_OPS:
        raise ValueError(f"unknown operation {op!r}; choose from {', '.join(OPS)}")
    top_k = None if op == "aces-o-all" else ACES_O_TOP_K
    if impl in BACKENDS:
        import aces_fast as af

        if op == "loo-auc":
            return lambda: af.loo_auc(B, backend=impl)
        if op == "loo-auc-weighted":
            return lambda: af.loo_auc(B, w, backend=impl)
        if op == "aces-c":
            return lambda: af.aces_c(B, backend=impl)
        return lambda: af.aces_o(B, steps=ACES_O_STEPS, top_k=top_k, backend=impl)
    from . import baselines as bl

    if impl == "numpy-rankdata" and op.startswith("loo-auc"):
        return lambda: bl.numpy_loo_auc(B, w if op == "loo-auc-weighted" else None)
    if impl == "numpy-rankdata" and op == "aces-c":
        return lambda: bl.numpy_aces_c(B)
    if impl == "torch-autograd" and op.startswith("aces-o"):
        return lambda: bl.torch_aces_o(B, steps=ACES_O_STEPS, top_k=top_k)
    raise ValueError(f"implementation {impl!r} does not compute {op!r}")


def inputs(case: Case, batch_tasks: int | None = None) -> list[tuple[Any, np.ndarray]]:
    """The ``(B, weights)`` inputs of a cell: one for a ``call`` cell, one per
    problem for a ``real`` cell, and ``(tasks, empty)`` for a batch cell
    (``batch_tasks`` tasks, default :attr:`Case.tasks`)."""
    if case.kind == "real":
        return list(workloads.real_problems(case.size))
    n, m = parse_size(case.size)
    if case.kind == "batch":
        count = case.tasks if batch_tasks is None else batch_tasks
        return [(workloads.batch_tasks(case.family, count, n, m), np.empty(0))]
    return [workloads.workload(case.family, n, m)]


def input_bytes(B: Any) -> int:
    """Bytes of a cell's input (a matrix or a task list)."""
    if isinstance(B, np.ndarray):
        return B.nbytes
    return sum(b.nbytes for b in B)


# ---------------------------------------------------------------------------
# cost estimates and skip rules


def _pairs(op: str, B: np.ndarray) -> float:
    """(passer, failer, test) triples of one ACES-O step on the optimized rows."""
    from .baselines import top_k_rows

    k = None if op == "aces-o-all" else ACES_O_TOP_K
    c = B[top_k_rows(B, k)].sum(axis=0, dtype=np.int64).astype(np.float64)
    rows = B.shape[0] if k is None else min(B.shape[0], k)
    return float(np.dot(c, rows - c))


def _call_seconds(op: str, impl: str, B: np.ndarray) -> float:
    n, m = B.shape
    if op.startswith("aces-o"):
        fixed = _NUMPY_STEP_TEST_S * m if impl == "numpy" else _STEP_S.get(impl, 0.0)
        return (ACES_O_STEPS + 1) * (_pairs(op, B) / _PAIR_RATE[impl] + fixed)
    if impl == "numpy":  # one Python iteration per test
        return m * (2e-5 + 1e-7 * n)
    if impl == "numpy-rankdata":  # a sort per column of the (n, m) score matrix
        return 1e-8 * n * m * math.log2(n + 1)
    return 0.0


def estimate_seconds(case: Case, batch_tasks: int | None = None) -> float:
    """A rough time (seconds) of one timed call of a cell: one call, one sweep
    over the problems, or one batch. Only ACES-O, the NumPy reference and the
    rankdata baseline at large sizes can be expensive."""
    if case.kind == "call":
        return _call_seconds(
            case.op, case.impl, workloads.workload(case.family, *parse_size(case.size))[0]
        )
    if case.kind == "real":
        return sum(_call_seconds(case.op, case.impl, B) for B, _ in inputs(case))
    count = case.tasks if batch_tasks is None else batch_tasks
    first = workloads.batch_tasks(case.family, 1, *parse_size(case.size))[0]  # no need for all
    op = BATCH_OPS[case.op][1]
    if case.impl in DEVICE_IMPLS:  # one batched run: the per-step cost is paid once
        fixed = _STEP_S[case.impl] * (ACES_O_STEPS + 1) if op.startswith("aces-o") else 0.0
        return _call_seconds(op, case.impl, first) * count - fixed * (count - 1)
    per_task = _call_seconds(op, case.impl, first)
    return per_task * count / case.threads


def _available_memory() -> float:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 4e9


def skip_reason(
    case: Case, max_call_s: float = 300.0, batch_tasks: int | None = None
) -> str | None:
    """Why ``case`` cannot or should not run here (``None`` when it runs).

    Reasons: an unavailable backend, device (no CUDA) or missing baseline dependency; the
    autograd baseline's ``(k, k, m)`` float64 pair tensors exceeding a quarter of
    the available memory; an estimated timed call over ``max_call_s``.
    """
    if case.impl in BACKENDS:
        reason = backend_unavailable_reason(case.impl)
        if reason is not None:
            return f"backend {case.impl} unavailable: {reason}"
    elif case.impl in DEVICE_IMPLS:
        reason = backend_unavailable_reason("torch")
        if reason is None:
            reason = device_unavailable_reason(TORCH_DEVICE[case.impl])
        if reason is not None:
            return f"{case.impl} unavailable: {reason}"
    elif case.impl == "torch-autograd":
        if importlib.util.find_spec("torch") is None:
            return "baseline (b) needs torch, which is not installed"
        from .baselines import torch_aces_o_bytes

        need = 0
        for B, _ in inputs(case):
            k = B.shape[0] if case.op == "aces-o-all" else min(B.shape[0], ACES_O_TOP_K)
            need = max(need, torch_aces_o_bytes(k, B.shape[1]))
        budget = _MEM_SHARE * _available_memory()
        if need > budget:
            return (
                f"infeasible: the autograd pair tensors (k x k x m float64) need "
                f"~{need / 1e9:.0f} GB, over {budget / 1e9:.1f} GB (O(k^2 m) memory)"
            )
    elif case.impl == "numpy-rankdata" and importlib.util.find_spec("scipy") is None:
        return "baseline (a) needs scipy, which is not installed"
    est = estimate_seconds(case, batch_tasks)
    if est > max_call_s:
        why = (
            "O(k^2 m) pair-test triples per step"
            if "aces-o" in case.op
            else "one Python iteration per test"
            if case.impl == "numpy"
            else "a sort per test"
        )
        return (
            f"over the time budget: ~{est:.3g} s per timed call estimated ({why}) "
            f"> {max_call_s:g} s"
        )
    return None
