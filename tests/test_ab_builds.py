"""tools/ab_builds.py: its cell specs, its check that two builds agree, and a
run of one build against itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import aces_fast
from helpers import load_tool

ab = load_tool("ab_builds")
TOOL = Path(__file__).resolve().parents[1] / "tools" / "ab_builds.py"


def test_cell_specs_and_their_errors():
    assert ab.parse_cell("aces-c:24x100") == {
        "spec": "aces-c:24x100", "method": "aces-c", "n": 24, "m": 100,
        "family": "distinct", "tasks": 1000, "where": "cache",
    }  # fmt: skip
    cell = ab.parse_cell("majority:3x5:dup-heavy:20:memory")
    assert (cell["family"], cell["tasks"], cell["where"]) == ("dup-heavy", 20, "memory")
    assert ab.parse_cell("codet:100x50:distinct:8:packed")["where"] == "packed"
    for bad, why in (
        ("aces-c", "method:NxM"),
        ("aces-c:24by100", "NxM"),
        ("aces-c:0x100", ">= 1"),
        ("aces-c:24x100:distinct:ten", "integer"),
        ("aces-c:24x100:distinct:10:disk", "cache, memory or packed"),
    ):
        with pytest.raises(ValueError, match=why):
            ab.parse_cell(bad)


def _build(scores):
    def rerank_batch(tasks, method, backend, n_threads):
        return [
            SimpleNamespace(scores=np.array(scores), order=np.array([1, 0]), weights=None)
            for _ in tasks
        ]

    return SimpleNamespace(rerank_batch=rerank_batch)


def test_builds_that_differ_in_any_bit_are_reported():
    cell = ab.parse_cell("aces-c:2x3:distinct:4")
    tasks = [np.zeros((2, 3), np.uint8)] * 4
    same = {"base": _build([0.5, 0.25]), "new": _build([0.5, 0.25])}
    assert ab.same_outputs(same, cell, tasks, 1) is None
    apart = {"base": _build([0.5, 0.25]), "new": _build([0.5, np.nextafter(0.25, 1)])}
    assert ab.same_outputs(apart, cell, tasks, 1) == "task 0: scores differs"


def test_one_build_against_itself():
    pytest.importorskip("aces_fast._core", reason="the C++ extension is not built")
    pkg = str(Path(aces_fast.__file__).resolve().parent)
    cells = [
        "aces-c:12x20:distinct:16:cache",
        "majority:30x40:dup-heavy:10:memory",
        "codet:20x50:distinct:12:packed",
    ]
    args = [sys.executable, str(TOOL), pkg, "--new", pkg, "--rounds", "2"]
    for c in cells:
        args += ["--cell", c]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2 rounds, 1 thread(s), microseconds a task"
    for c in cells:
        row = next(line for line in lines if line.startswith(c))
        base, new, ratio = (float(x) for x in row.split()[1:4])
        assert base > 0 and new > 0 and ratio > 0
