"""Results on the bundled real data are pinned (tests/golden/bundled.json,
written by tools/make_golden.py before the architecture refactor).

Every backend's result arrays (scores, weights, order, loo_auc, objective) must
stay bit-identical over all problems of both bundled datasets, and so must the
``evaluate`` Pass@k numbers. A change that is meant to change results must say
so and regenerate the file in the same commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aces_fast as af
from aces_fast.datasets import load_dataset
from aces_fast.evaluation import evaluate

GOLDEN = json.loads((Path(__file__).parent / "golden" / "bundled.json").read_text())
_SLOW = {("numpy", "humaneval-codegen16b"), ("torch", "humaneval-codegen16b")}


def _make_golden():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_golden", Path(__file__).parent.parent / "tools" / "make_golden.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cases():
    for name, entry in GOLDEN["datasets"].items():
        for backend in entry["digests"]:
            marks = [pytest.mark.slow] if (backend, name) in _SLOW else []
            yield pytest.param(name, backend, id=f"{name}-{backend}", marks=marks)


@pytest.fixture(scope="module")
def datasets():
    return {name: load_dataset(name) for name in GOLDEN["datasets"]}


@pytest.mark.parametrize("name, backend", list(_cases()))
def test_bundled_results_unchanged(name, backend, datasets):
    if backend not in af.available_backends():
        pytest.skip(f"backend {backend} not available")
    entry = GOLDEN["datasets"][name]
    mod = _make_golden()
    ds = datasets[name]
    pinned = entry["digests"][backend]
    for method, want in pinned.items():
        got = mod.digests(ds, method, backend)
        assert got == want, f"{name} {backend} {method}: results changed"
    ev = evaluate(ds, ["random"] + list(pinned) + ["oracle"], backend=backend).to_dict()
    assert {"all": ev["all"], "mixed": ev["mixed"]} == entry["evaluate"][backend]
