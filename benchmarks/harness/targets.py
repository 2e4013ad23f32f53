"""The project's speed goals, evaluated on a benchmark report.

Each goal is printed as measured / goal / met, not met or not measured; none is
asserted anywhere (a unit test never checks a wall-clock time). The aces_fast
side of a goal is the backend ``auto`` picks (what a user gets), one thread
unless the goal says otherwise, on the ``distinct`` family (no duplicate rows:
the case users hit, not the favourable one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .report import fmt_ratio

#: (name, op, family, size, threads, kind of goal, goal value); ratio goals are
#: baseline time / aces_fast time, in the same group of the same run
GOALS: tuple[tuple[str, str, str, str, int, str, float], ...] = (
    (
        "ACES-C 200x500 distinct, 1 thread, vs baseline (a) numpy-rankdata",
        "aces-c",
        "distinct",
        "200x500",
        1,
        "ratio",
        250.0,
    ),
    (
        "ACES-O K=24 T=90 200x500 distinct, 1 thread, vs baseline (b) torch-autograd",
        "aces-o",
        "distinct",
        "200x500",
        1,
        "ratio",
        100.0,
    ),
    (
        "end-to-end ACES-C 24x100 distinct, 1 thread, median per call",
        "aces-c",
        "distinct",
        "24x100",
        1,
        "max_s",
        20e-6,
    ),
    (
        "rerank_batch ACES-C 200 tasks of 200x500 distinct, 2 threads",
        "batch-aces-c",
        "distinct",
        "200x500",
        2,
        "tasks_per_s",
        30000.0,
    ),
    (
        "LOO-AUC 20000x1000 distinct, 1 thread, vs baseline (a) numpy-rankdata",
        "loo-auc",
        "distinct",
        "20000x1000",
        1,
        "ratio",
        100.0,
    ),
)
NUMBA_WITHIN = 3.0
IMPORT_MS = 150.0

#: The GPU goals of issue 22 (one H100 or H200; a device run,
#: ``--device cuda``): (name, op, family, size, kind, goal). ``speedup`` goals are
#: cpp-on-all-cores time / torch-cuda time in the same group of the same run;
#: ``max_s`` and ``tasks_per_s`` read the torch-cuda cell alone.
DEVICE_GOALS: tuple[tuple[str, str, str, str, str, float], ...] = (
    (
        "rerank_batch ACES-C 2000 tasks of 200x500 distinct, torch-cuda vs cpp all cores",
        "batch-aces-c",
        "distinct",
        "200x500",
        "speedup",
        10.0,
    ),
    (
        "rerank_batch ACES-C 2000 tasks of 200x500 distinct, torch-cuda",
        "batch-aces-c",
        "distinct",
        "200x500",
        "tasks_per_s",
        1_000_000.0,
    ),
    (
        "rerank_batch ACES-O K=24 200 tasks of 200x500 distinct, torch-cuda vs cpp all cores",
        "batch-aces-o",
        "distinct",
        "200x500",
        "speedup",
        5.0,
    ),
    (
        "ACES-O top_k=None T=90 2000x1000 distinct, torch-cuda, median per call",
        "aces-o-all",
        "distinct",
        "2000x1000",
        "max_s",
        1.0,
    ),
    (
        "LOO-AUC 100000x2000 distinct, torch-cuda vs cpp all cores",
        "loo-auc",
        "distinct",
        "100000x2000",
        "speedup",
        5.0,
    ),
    (
        "ACES-C 200x500 distinct, one call, CUDA tensor in and out, torch-cuda",
        "aces-c",
        "distinct",
        "200x500",
        "max_s",
        0.2e-3,
    ),
)
#: the implementation a device goal reads
DEVICE_IMPL = "torch-cuda"


def target_groups() -> list[tuple[str, str, str, int]]:
    """``(op, family, size, threads)`` of every group a goal reads (the ``target``
    marker of the suite selects them)."""
    return [(op, family, size, threads) for _, op, family, size, threads, _, _ in GOALS]


def device_target_cells() -> list[tuple[str, str, str, str]]:
    """``(op, family, size, impl)`` of every cell a device goal reads: the
    torch-cuda cell, and for a speed-up goal the cpp cell beside it."""
    out = []
    for _, op, family, size, kind, _ in DEVICE_GOALS:
        for impl in (DEVICE_IMPL, "cpp") if kind == "speedup" else (DEVICE_IMPL,):
            if (op, family, size, impl) not in out:
                out.append((op, family, size, impl))
    return out


def _fmt_seconds(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def evaluate_device(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every GPU goal (:data:`DEVICE_GOALS`) on the aggregated cells of a device
    run; a goal whose torch-cuda cell is missing or skipped is ``not measured``
    (with the skip reason, e.g. no CUDA device, in ``why``)."""
    out = []
    for name, op, family, size, kind, goal in DEVICE_GOALS:
        cell = _find(rows, op, family, size, DEVICE_IMPL, _threads_of(rows, op, family, size))
        if kind == "speedup":
            value = cell.get("speedup_vs_cpp") if cell else None
            shown = fmt_ratio(value) if value else "-"
            entry = _entry(name, f">= {goal:g}x cpp", value, shown, bool(value and value >= goal))
        elif kind == "max_s":
            value = cell["median_s"] if cell else None
            entry = _entry(
                name,
                f"<= {_fmt_seconds(goal)}",
                value,
                _fmt_seconds(value) if value else "-",
                bool(value and value <= goal),
            )
        else:
            value = cell.get("tasks_per_s") if cell else None
            entry = _entry(
                name,
                f">= {goal:,.0f} tasks/s",
                value,
                f"{value:,.0f} tasks/s" if value else "-",
                bool(value and value >= goal),
            )
        if cell is None:
            skipped = [
                r["skipped"]
                for r in rows
                if (r["op"], r["family"], r["size"], r["impl"]) == (op, family, size, DEVICE_IMPL)
                and r.get("skipped")
            ]
            if skipped:
                entry["why"] = skipped[0]
        out.append(entry)
    return out


def _threads_of(rows: Sequence[dict[str, Any]], op: str, family: str, size: str) -> int:
    """The thread count of a device run's cell (all of that host's cores)."""
    for r in rows:
        if (r["op"], r["family"], r["size"], r["impl"]) == (op, family, size, DEVICE_IMPL):
            return int(r["threads"])
    return -1


def _find(
    rows: Sequence[dict[str, Any]], op: str, family: str, size: str, impl: str, threads: int
) -> dict[str, Any] | None:
    for r in rows:
        if (r["op"], r["family"], r["size"], r["impl"], r["threads"]) == (
            op,
            family,
            size,
            impl,
            threads,
        ) and not r.get("skipped"):
            return r
    return None


def _entry(name: str, goal: str, value: float | None, shown: str, met: bool) -> dict[str, Any]:
    if value is None:
        return {
            "target": name,
            "goal": goal,
            "measured": None,
            "shown": "-",
            "status": "not measured",
        }
    return {
        "target": name,
        "goal": goal,
        "measured": value,
        "shown": shown,
        "status": "met" if met else "not met",
    }


def evaluate(
    rows: Sequence[dict[str, Any]], default_backend: str, import_time: dict[str, float] | None
) -> list[dict[str, Any]]:
    """Every goal on the aggregated cells ``rows`` (see :func:`.report.aggregate`)."""
    out = []
    for name, op, family, size, threads, kind, goal in GOALS:
        cell = _find(rows, op, family, size, default_backend, threads)
        label = f"{name} [{default_backend}]"
        if kind == "ratio":
            value = cell.get("ratio") if cell else None
            shown = "-" if not value else f"{value:.1f}x" if value >= 1 else fmt_ratio(value)
            out.append(_entry(label, f">= {goal:g}x", value, shown, bool(value and value >= goal)))
        elif kind == "max_s":
            value = cell["median_s"] if cell else None
            out.append(
                _entry(
                    label,
                    f"<= {goal * 1e6:g} us",
                    value,
                    f"{value * 1e6:.1f} us" if value else "-",
                    bool(value and value <= goal),
                )
            )
        else:
            value = cell.get("tasks_per_s") if cell else None
            out.append(
                _entry(
                    label,
                    f">= {goal:,.0f} tasks/s",
                    value,
                    f"{value:,.0f} tasks/s" if value else "-",
                    bool(value and value >= goal),
                )
            )

    def worst_numba(threads: int | None) -> tuple[float, str] | None:
        worst: tuple[float, str] | None = None
        for r in rows:  # vs_cpp: numba time / cpp time, per repetition of the same run
            if (
                r["impl"] == "numba"
                and not r.get("skipped")
                and r.get("vs_cpp")
                and threads in (None, r["threads"])
            ):
                where = f"{r['op']} {r['family']} {r['size']} {r['threads']}t"
                if worst is None or r["vs_cpp"] > worst[0]:
                    worst = (r["vs_cpp"], where)
        return worst

    worst, one = worst_numba(None), worst_numba(1)
    shown = f"{worst[0]:.2f}x ({worst[1]})" if worst else "-"
    if worst and one and one != worst:  # two threads on a busy machine measure contention
        shown += f"; 1 thread: {one[0]:.2f}x ({one[1]})"
    out.append(
        _entry(
            f"numba within {NUMBA_WITHIN:g}x of cpp on every cell (worst cell)",
            f"<= {NUMBA_WITHIN:g}x",
            worst[0] if worst else None,
            shown,
            bool(worst and worst[0] <= NUMBA_WITHIN),
        )
    )

    ms = None
    if import_time and not math.isnan(import_time.get("importtime_s", math.nan)):
        ms = import_time["importtime_s"] * 1e3
    out.append(
        _entry(
            "import aces_fast (python -X importtime, best of 5)",
            f"<= {IMPORT_MS:g} ms",
            ms,
            f"{ms:.0f} ms (numpy {import_time['numpy_s'] * 1e3:.0f} ms)"
            if ms is not None and import_time
            else "-",
            bool(ms is not None and ms <= IMPORT_MS),
        )
    )
    return out


def format_targets(targets: Sequence[dict[str, Any]]) -> str:
    """A fixed-width table: target, measured, goal, status."""
    width = max(len(t["target"]) for t in targets)
    mw = max([len("measured")] + [len(t["shown"]) for t in targets])
    gw = max([len("goal")] + [len(t["goal"]) for t in targets])
    lines = [f"{'target'.ljust(width)}  {'measured'.ljust(mw)}  {'goal'.ljust(gw)}  status"]
    for t in targets:
        lines.append(
            f"{t['target'].ljust(width)}  {t['shown'].ljust(mw)}  "
            f"{t['goal'].ljust(gw)}  {t['status']}"
        )
    return "\n".join(lines)
