"""Evaluate ranking methods on a labelled dataset: Pass@k, timing, diagnostics.

This is the logic behind ``aces-fast evaluate``, usable from Python::

    from aces_fast.datasets import load_dataset
    from aces_fast.evaluation import evaluate

    ev = evaluate(load_dataset("humaneval-gpt35"))
    print(ev.table())
    ev.summary("mixed")["aces-c"]["pass@1"]

Every method runs on every problem (including problems without tests, where
all scores are equal, and problems without labels, which are timed but not
scored). Pass@k is the exact expectation under uniform random tie breaking
(:func:`aces_fast.pass_at_k`); ``k > n`` counts as ``n``. Two reference rows
need no method: ``"random"`` (all scores equal: the expected Pass@k of a random
ranking) and ``"oracle"`` (scores = labels).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _registry
from ._registry import method_params
from .datasets import Dataset
from .methods import rerank
from .metrics import diagnostics, pass_at_k

__all__ = ["ALL_METHODS", "DEFAULT_KS", "Evaluation", "evaluate", "method_params"]

#: Reference rows computed without a ranking method.
REFERENCE_METHODS = ("random", "oracle")
DEFAULT_KS = (1, 2, 5)


class _AllMethods(Sequence[str]):
    """Every method name ``evaluate`` knows, in table order: ``"random"``, the
    registered methods (:mod:`aces_fast._registry`, a live view), ``"oracle"``."""

    def _names(self) -> tuple[str, ...]:
        return (REFERENCE_METHODS[0], *_registry.names(), *REFERENCE_METHODS[1:])

    def __getitem__(self, i: Any) -> Any:
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __repr__(self) -> str:
        return repr(self._names())


ALL_METHODS: Sequence[str] = _AllMethods()


def _run_params(method: str, overrides: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """The hyperparameters ``method`` runs with: its tunable defaults updated by
    ``overrides`` for its family (see :func:`aces_fast._registry.method_params`);
    ``{}`` for the reference rows."""
    if method in REFERENCE_METHODS:
        return {}
    family = _registry.get(method).family
    return method_params(method, (overrides or {}).get(family), tunable=True)


def _check_methods(methods: Iterable[str] | None) -> list[str]:
    if methods is None:
        return list(ALL_METHODS)
    if isinstance(methods, str):
        raise TypeError(
            f"methods must be a sequence of names, not the string {methods!r}; e.g. [{methods!r}]"
        )
    # names are case-insensitive, like backend names
    chosen = [m.strip().lower() if isinstance(m, str) else m for m in methods]
    if not chosen:
        raise ValueError("no methods selected")
    bad = [m for m in chosen if m not in ALL_METHODS]
    if bad:
        raise ValueError(
            f"unknown method(s) {', '.join(map(repr, bad))}; choose from {', '.join(ALL_METHODS)}"
        )
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"method listed twice in {chosen}")
    return chosen


def _as_float(x: Any) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


@dataclass
class Evaluation:
    """Outcome of :func:`evaluate` on one dataset.

    Attributes
    ----------
    dataset, source : str
    methods : list of str
    ks : tuple of int
    pass_at : dict method -> float64 array (P, len(ks))
        Pass@k per problem (``nan`` for problems without labels).
    seconds : dict method -> float
        Wall time of the method summed over problems (evaluation excluded).
    backends : dict method -> str
        Backend that ran the method (``"-"`` for the reference rows).
    labelled, mixed : bool arrays (P,)
        Problems with labels; problems with ``0 < correct < n``.
    n_tests : int array (P,)
    diagnostics : dict
        Averages of :func:`aces_fast.diagnostics` over mixed problems with at
        least one non-constant test (see :meth:`diagnostics_summary`).
    params : dict method -> dict
        Hyperparameters each method ran with.
    task_ids : list of str
    """

    dataset: str
    source: str
    methods: list[str]
    ks: tuple
    pass_at: dict[str, np.ndarray]
    seconds: dict[str, float]
    backends: dict[str, str]
    labelled: np.ndarray
    mixed: np.ndarray
    n_tests: np.ndarray
    diagnostics: dict[str, Any]
    params: dict[str, dict[str, Any]]
    task_ids: list[str] = field(default_factory=list)

    @property
    def n_problems(self) -> int:
        return int(self.labelled.shape[0])

    def summary(self, subset: str = "all") -> dict[str, dict[str, float | None]]:
        """Mean Pass@k per method over ``"all"`` labelled problems or the ``"mixed"`` ones.

        Returns ``{method: {"pass@1": fraction, ...}}``; ``None`` when the subset is empty.
        """
        if subset not in ("all", "mixed"):
            raise ValueError(f"subset must be 'all' or 'mixed'; got {subset!r}")
        mask = self.labelled if subset == "all" else self.mixed
        out: dict[str, dict[str, float | None]] = {}
        for meth in self.methods:
            vals = self.pass_at[meth][mask]
            means = vals.mean(axis=0) if vals.shape[0] else [None] * len(self.ks)
            out[meth] = {f"pass@{k}": _as_float(v) for k, v in zip(self.ks, means)}
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the output of ``aces-fast evaluate --json``).

        Keys: ``all``, ``mixed`` (``{method: {"pass@k": fraction}}``),
        ``seconds``, ``backends``, ``params``, ``diagnostics``, ``dataset``,
        ``source``, ``ks``, ``n_problems``, ``n_labelled``, ``n_mixed``,
        ``n_without_tests``. NaN becomes ``None``.
        """
        return {
            "dataset": self.dataset,
            "source": self.source,
            "ks": list(self.ks),
            "n_problems": self.n_problems,
            "n_labelled": int(self.labelled.sum()),
            "n_mixed": int(self.mixed.sum()),
            "n_without_tests": int((self.n_tests == 0).sum()),
            "all": self.summary("all"),
            "mixed": self.summary("mixed"),
            "seconds": dict(self.seconds),
            "backends": dict(self.backends),
            "params": {k: dict(v) for k, v in self.params.items()},
            "diagnostics": {
                k: (_as_float(v) if isinstance(v, float) else v)
                for k, v in self.diagnostics.items()
            },
        }

    def table(self) -> str:
        """A readable table: methods as rows, Pass@k (percent, one decimal) for all
        and mixed problems, and the time per method."""
        n_all, n_mixed = int(self.labelled.sum()), int(self.mixed.sum())
        all_s, mix_s = self.summary("all"), self.summary("mixed")
        ks = [f"pass@{k}" for k in self.ks]
        name_w = max(len("method"), *(len(m) for m in self.methods))
        col_w = 7
        group_w = len(ks) * (col_w + 1) - 1

        def pct(v: float | None) -> str:
            return f"{'-':>{col_w}}" if v is None else f"{100 * v:{col_w}.1f}"

        left_all = f"all ({n_all})"
        left_mix = f"mixed ({n_mixed})"
        lines = [
            (
                f"{self.dataset}: {self.n_problems} problems, {n_all} labelled, {n_mixed} mixed "
                f"(0 < correct < n), {int((self.n_tests == 0).sum())} without tests"
            ),
            f"{'':{name_w}}  {left_all:^{group_w}}  {left_mix:^{group_w}}  {'time':>8}  backend",
            f"{'method':{name_w}}  "
            + " ".join(f"{k:>{col_w}}" for k in ks)
            + "  "
            + " ".join(f"{k:>{col_w}}" for k in ks)
            + f"  {'(s)':>8}",
        ]
        lines.append("-" * len(lines[-1]) + "---------")
        for meth in self.methods:
            row = (
                f"{meth:{name_w}}  "
                + " ".join(pct(all_s[meth][k]) for k in ks)
                + "  "
                + " ".join(pct(mix_s[meth][k]) for k in ks)
                + f"  {self.seconds[meth]:8.3f}  {self.backends[meth]}"
            )
            lines.append(row)
        lines.append("Pass@k in percent: exact expectation with ties broken at random.")
        # one line per family: its members run with the same hyperparameters
        hp = "; ".join(
            f"{m}: " + " ".join(f"{k}={v}" for k, v in p.items())
            for m, p in self.params.items()
            if p and _registry.get(m).family == m
        )
        if hp:
            lines.append("hyperparameters: " + hp)
        d = self.diagnostics
        if d.get("problems"):
            left_out = [
                f"{d[k]} {what}"
                for k, what in (
                    ("no_tests", "without tests"),
                    ("constant_tests", "with constant tests only"),
                )
                if d.get(k)
            ]
            other = (
                f" (the other {d['mixed'] - d['problems']}: {', '.join(left_out)})"
                if left_out
                else ""
            )
            lines.append(
                f"diagnostics over {d['problems']} of {d['mixed']} mixed problems{other}: mean "
                f"delta {d['delta_bar']:.3f}; paper's assumption delta > 2 sqrt(ln 2 / m) holds on "
                f"{100 * d['assumption_holds']:.1f}%\n"
                f"  (correct, incorrect, test) votes: informative {100 * d['informative']:.1f}%, "
                f"uninformative {100 * d['uninformative']:.1f}%, "
                f"misleading {100 * d['misleading']:.1f}%"
            )
        return "\n".join(lines)


def diagnostics_summary(dataset: Dataset) -> dict[str, Any]:
    """Mean test-quality diagnostics over the mixed problems that have a non-constant test.

    Returns ``problems`` (how many), ``mixed`` (all mixed problems), the mixed
    ones left out -- ``no_tests`` (m = 0) and ``constant_tests`` (every test
    passed by all candidates or by none: nothing to diagnose) --,
    ``assumption_holds`` (share meeting the paper's
    ``delta_bar > 2 sqrt(ln 2 / M)``), and means of ``delta_bar`` and of the
    informative / uninformative / misleading vote shares. O(total n m).
    """
    rows = []
    mixed = no_tests = constant = 0
    for p in dataset:
        if not p.is_mixed:
            continue
        mixed += 1
        if p.m == 0:
            no_tests += 1
            continue
        d = diagnostics(p.B, p.labels)
        if not d.nonconstant.any():
            constant += 1
            continue
        rows.append(
            (float(d.assumption_holds), d.delta_bar, d.informative, d.uninformative, d.misleading)
        )
    counts = {
        "problems": len(rows),
        "mixed": mixed,
        "no_tests": no_tests,
        "constant_tests": constant,
    }
    keys = ("assumption_holds", "delta_bar", "informative", "uninformative", "misleading")
    if not rows:
        return {**counts, **{k: float("nan") for k in keys}}
    means = np.mean(np.array(rows), axis=0)
    return {**counts, **{k: float(v) for k, v in zip(keys, means)}}


_WARMUP = np.array([[1, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 0]], dtype=np.uint8)


def evaluate(
    dataset: Dataset,
    methods: Sequence[str] | None = None,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    backend: str | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """Run ranking methods on every problem of ``dataset`` and score them.

    Parameters
    ----------
    dataset : Dataset
    methods : sequence of str, optional
        Names from :data:`ALL_METHODS` (``rerank`` names plus ``"random"`` and
        ``"oracle"``; any case); default all, in table order.
    ks : sequence of int, default (1, 2, 5)
    backend : str, optional
        Passed to every method (``None``: ``ACES_FAST_BACKEND``, then auto).
    params : mapping, optional
        Hyperparameter overrides per method family, e.g. ``{"aces-o": {"lr": 0.05},
        "b4": {"alpha": 100.0}}`` (``"aces-o"`` also applies to ``"aces-o-warm"``;
        the tunable hyperparameters are declared in :mod:`aces_fast._registry`).
    progress : callable, optional
        Called with the method name after each (method, problem) pair, e.g. to
        advance a progress bar; ``len(methods) * len(dataset)`` calls in all.

    Returns
    -------
    Evaluation

    Each method is first run once, untimed, on a tiny matrix so that one-off
    costs (JIT compilation, backend loading) do not count as its time. Cost:
    the methods' own cost on every problem plus O(n log n) per Pass@k.
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(
            f"dataset must be a Dataset (see aces_fast.datasets.load_dataset); "
            f"got {type(dataset).__name__}"
        )
    chosen = _check_methods(methods)
    ks = tuple(int(k) for k in ks)
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"ks must be positive integers; got {ks}")
    families = _registry.tunable_families()
    for family in params or {}:
        if family not in families:
            raise ValueError(
                f"no tunable hyperparameters for {family!r}; params accepts {', '.join(families)}"
            )
    run_params = {m: _run_params(m, params) for m in chosen}
    P = len(dataset)
    labelled = np.array([p.labels is not None for p in dataset], dtype=bool)
    mixed = np.array([p.is_mixed for p in dataset], dtype=bool)
    pass_at: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    backends: dict[str, str] = {}
    for meth in chosen:
        table = np.full((P, len(ks)), np.nan)
        elapsed = 0.0
        used = "-"
        if meth not in REFERENCE_METHODS:
            rerank(_WARMUP, meth, backend=backend, **run_params[meth])
        scores: np.ndarray | None
        for i, prob in enumerate(dataset):
            if meth == "random":
                scores = np.zeros(prob.n)
            elif meth == "oracle":
                scores = None if prob.labels is None else prob.labels.astype(np.float64)
            else:
                t0 = time.perf_counter()
                res = rerank(prob.B, meth, backend=backend, **run_params[meth])
                elapsed += time.perf_counter() - t0
                scores, used = res.scores, res.backend
            if scores is not None and prob.labels is not None:
                table[i] = [pass_at_k(scores, prob.labels, k) for k in ks]
            if progress is not None:
                progress(meth)
        pass_at[meth] = table
        seconds[meth] = elapsed
        backends[meth] = used
    return Evaluation(
        dataset=dataset.name,
        source=dataset.source,
        methods=chosen,
        ks=ks,
        pass_at=pass_at,
        seconds=seconds,
        backends=backends,
        labelled=labelled,
        mixed=mixed,
        n_tests=np.array([p.m for p in dataset], dtype=np.int64),
        diagnostics=diagnostics_summary(dataset),
        params=run_params,
        task_ids=dataset.task_ids,
    )
