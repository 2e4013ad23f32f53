"""Parity of the torch backend on a device against the cpp backend (issue 22).

Every method of :data:`aces_fast.METHODS` runs on a torch tensor on ``--device``
(``cuda`` by default) with ``backend="torch"`` and on the same matrix as NumPy
with ``backend="cpp"``; the results must agree: ``order`` exactly, the floats
(``scores``, ``weights``, ``objective``, ``loo_auc``) within ``1e-9``, except
ACES-O's weights and scores, held to ``1e-6`` as in tests/test_torch_backend.py
(the torch backend's own exponential), and B4's scores, held to the larger of
``1e-9`` and the contract's ``1e-14 L`` (``L = lnΓ(N M + a + b + 2)``: the
terms cancel and torch's ``lgamma`` is not the C library's). The kernels ``loo_auc`` and
``surrogate_loo_auc`` (random simplex weights, ``gamma = 10``: values,
objective and gradient within ``1e-9``) are checked too.

Inputs: the bundled HumanEval problems (``aces_fast.datasets.load_dataset``)
and random matrices of every family of ``benchmarks/harness/families.py`` (the
tests' fuzzing families: Bernoulli, planted, few distinct rows, duplicated
columns, constant columns, all constant, nested, one informative column, near
identity) at several shapes.

Prints one line per method (cases, failures, largest float difference) and the
first failures; exit status 1 on any mismatch, 2 when the device is missing.

    python tools/gpu_parity.py                      # on the GPU, everything
    python tools/gpu_parity.py --device cpu --quick # the same logic on CPU tensors
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

# the checkout's root, for benchmarks.harness when run as `python tools/gpu_parity.py`
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness.families import FAMILIES, family_matrix

BUNDLED = ("humaneval-codegen16b", "humaneval-gpt35")
SHAPES = ((1, 1), (2, 3), (7, 5), (24, 100), (60, 40), (200, 500))
QUICK_SHAPES = ((1, 1), (2, 3), (7, 5), (24, 60))
FLOAT_TOL = 1e-9
ACES_O_TOL = 1e-6  # tests/test_torch_backend.py: ACES-O weights and scores
#: the paper's ACES-O is costly on CPU tensors: smaller runs there
METHOD_PARAMS = {"aces-o": {"steps": 30}, "aces-o-warm": {"steps": 30}}


def cases(
    per_family: int, shapes: tuple[tuple[int, int], ...], max_problems: int | None
) -> Iterator[tuple[str, np.ndarray]]:
    """``(label, B)``: bundled problems, then random matrices."""
    from aces_fast.datasets import load_dataset

    for name in BUNDLED:
        for k, problem in enumerate(load_dataset(name)):
            if max_problems is not None and k >= max_problems:
                break
            B = np.array(problem.B, dtype=np.uint8, order="C")
            if B.shape[1] > 0:
                yield f"{name}[{k}]", B
    rng = np.random.default_rng(2026)
    for family in FAMILIES:
        for n, m in shapes:
            for i in range(per_family):
                yield f"{family} {n}x{m} #{i}", family_matrix(family, n, m, rng)


def _host(x: Any) -> np.ndarray | None:
    if x is None:
        return None
    return np.asarray(x.detach().cpu()) if hasattr(x, "detach") else np.asarray(x)


#: the fields :func:`compare` checks (a kernel's result is given as these names)
FIELDS = ("order", "scores", "weights", "objective", "loo_auc", "gradient")


def b4_scale(shape: tuple[int, int]) -> float:
    """docs/contract.rst §4's ``L`` for B4 at the default priors: its scores agree
    to ``1e-14 L``."""
    from aces_fast import _registry

    spec = _registry.get("b4")
    n, m = shape
    return math.lgamma(n * m + spec.default("alpha") + spec.default("beta0") + 2)


def compare(method: str, got: Any, ref: Any, scale: float = 0.0) -> tuple[str | None, float]:
    """``(what differs or None, largest float difference)``; ``scale``: B4's
    :func:`b4_scale` (its scores' tolerance is ``1e-14`` times it)."""
    worst = 0.0
    aces_o = method.startswith("aces-o")
    for field in FIELDS:
        a, r = _host(getattr(got, field, None)), _host(getattr(ref, field, None))
        if (a is None) != (r is None):
            return f"{field}: one side is None", worst
        if a is None or r is None:
            continue
        if a.shape != r.shape:
            return f"{field}: shape {a.shape} vs {r.shape}", worst
        if field == "order":
            if not np.array_equal(a, r):
                return "order differs", worst
            continue
        a, r = a.astype(np.float64), r.astype(np.float64)
        if not np.array_equal(np.isnan(a), np.isnan(r)):
            return f"{field}: NaN in different places", worst
        both = ~np.isnan(a)
        diff = float(np.abs(a[both] - r[both]).max()) if both.any() else 0.0
        worst = max(worst, diff)
        tol = ACES_O_TOL if aces_o and field in ("weights", "scores") else FLOAT_TOL
        if method == "b4" and field == "scores":
            tol = max(FLOAT_TOL, 1e-14 * scale)
        if diff > tol:
            return f"{field}: max |diff| {diff:.3g} > {tol:g}", worst
    return None, worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="torch device (default: cuda)")
    parser.add_argument(
        "--quick", action="store_true", help="few random cases, small shapes (CPU check)"
    )
    parser.add_argument(
        "--per-family",
        type=int,
        default=None,
        help="random matrices per family and shape (default 3, 1 with --quick)",
    )
    parser.add_argument("--max-problems", type=int, default=None, help="bundled problems each")
    args = parser.parse_args(argv)

    import torch

    import aces_fast as af

    device = args.device or "cuda"
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        print(f"gpu_parity: no CUDA device is available (torch {torch.__version__})")
        return 2
    # 3 x 9 families: about the 180 random matrices of the five families run before
    per_family = args.per_family or (1 if args.quick else 3)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    max_problems = (
        args.max_problems if args.max_problems is not None else (8 if args.quick else None)
    )
    methods = [*af.METHODS, "loo-auc", "surrogate"]
    stats = {m: {"cases": 0, "failures": 0, "max_diff": 0.0} for m in methods}
    failures: list[str] = []
    t0 = time.perf_counter()
    rng = np.random.default_rng(22)  # the surrogate's weights
    warnings.simplefilter("ignore", af.CostWarning)
    for label, B in cases(per_family, shapes, max_problems):
        Bt = torch.from_numpy(B).to(device)
        for method in methods:
            s = stats[method]
            s["cases"] += 1
            try:
                if method == "loo-auc":
                    got = _Kernel(loo_auc=af.loo_auc(Bt, backend="torch"))
                    ref = _Kernel(loo_auc=af.loo_auc(B, backend="cpp"))
                elif method == "surrogate":
                    w = rng.random(B.shape[1])
                    w /= max(w.sum(), 1.0)
                    got = _Kernel.of(
                        af.surrogate_loo_auc(
                            Bt, torch.from_numpy(w).to(device), 10.0, backend="torch"
                        )
                    )
                    ref = _Kernel.of(af.surrogate_loo_auc(B, w, 10.0, backend="cpp"))
                else:
                    params = METHOD_PARAMS.get(method, {})
                    got = af.rerank(Bt, method, backend="torch", **params)
                    ref = af.rerank(B, method, backend="cpp", **params)
                    if str(getattr(got.order, "device", device)) != str(Bt.device):
                        raise AssertionError(f"result on {got.order.device}, input on {Bt.device}")
                why, diff = compare(method, got, ref, b4_scale(B.shape))
            except Exception as exc:  # a crash on the device is a failure, not an abort
                why, diff = f"{type(exc).__name__}: {exc}", 0.0
            s["max_diff"] = max(s["max_diff"], diff)
            if why is not None:
                s["failures"] += 1
                failures.append(f"{method} on {label} {B.shape}: {why}")
    total_cases = sum(s["cases"] for s in stats.values())
    total_fail = sum(s["failures"] for s in stats.values())
    print(f"parity: torch on {device} vs cpp on NumPy ({time.perf_counter() - t0:.1f} s)")
    print(f"{'method':<14}{'cases':>7}{'failures':>10}  max float diff")
    for method, s in stats.items():
        print(f"{method:<14}{s['cases']:>7}{s['failures']:>10}  {s['max_diff']:.3g}")
    print(f"{'all':<14}{total_cases:>7}{total_fail:>10}")
    for line in failures[:20]:
        print(f"  FAIL {line}")
    if len(failures) > 20:
        print(f"  ... and {len(failures) - 20} more")
    return 1 if total_fail else 0


class _Kernel:
    """A kernel's outputs under the field names :func:`compare` reads."""

    def __init__(self, **fields: Any):
        self.__dict__.update(fields)

    @classmethod
    def of(cls, sr: Any) -> _Kernel:
        """A surrogate result: values as ``loo_auc``, the objective as a 1-vector."""
        objective = sr.objective.reshape(1) if hasattr(sr.objective, "reshape") else [sr.objective]
        return cls(loo_auc=sr.values, objective=objective, gradient=sr.gradient)


if __name__ == "__main__":
    sys.exit(main())
