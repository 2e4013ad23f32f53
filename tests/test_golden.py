"""Results on the bundled real data are pinned (tests/golden/bundled.json,
written by tools/make_golden.py before the architecture refactor).

Every backend's result arrays (scores, weights, order, loo_auc, objective) must
stay bit-identical over all problems of both bundled datasets, and so must the
``evaluate`` Pass@k numbers -- except the floats of ACES-O on numba and torch,
which use the platform's exponential (see ``_PLATFORM_MATH``). A change that is meant to change results must say
so and regenerate the file in the same commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aces_fast as af
from aces_fast.datasets import load_dataset
from aces_fast.evaluation import evaluate
from helpers import load_tool

GOLDEN = json.loads((Path(__file__).parent / "golden" / "bundled.json").read_text())
#: Methods whose floats come from exp/log of the platform's math (numba: LLVM's
#: vector library, torch: its own SIMD exp) on backends that do not carry their
#: own exponential. Their last bits move from one CPU to another (an AVX-512 and
#: an AVX2-only host differ), so there the orders and Pass@k stay pinned and the
#: floats are held to the contract's cross-backend tolerance against cpp, whose
#: results are pinned bit for bit (docs/contract.rst, "Agreement").
_PLATFORM_MATH = {
    ("numba", "aces-o"),
    ("numba", "aces-o-warm"),
    ("torch", "aces-o"),
    ("torch", "aces-o-warm"),
}
_ACES_O_TOL = 1e-6
_SLOW = {("numpy", "humaneval-codegen16b"), ("torch", "humaneval-codegen16b")}


def _make_golden():
    return load_tool("make_golden")


def _cases():
    for name, entry in GOLDEN["datasets"].items():
        for backend in entry["digests"]:
            marks = [pytest.mark.slow] if (backend, name) in _SLOW else []
            yield pytest.param(name, backend, id=f"{name}-{backend}", marks=marks)


@pytest.fixture(scope="module")
def datasets():
    return {name: load_dataset(name) for name in GOLDEN["datasets"]}


@pytest.mark.parametrize(("name", "backend"), list(_cases()))
def test_bundled_results_unchanged(name, backend, datasets):
    if backend not in af.available_backends():
        pytest.skip(f"backend {backend} not available")
    entry = GOLDEN["datasets"][name]
    mod = _make_golden()
    ds = datasets[name]
    pinned = entry["digests"][backend]
    for method, want in pinned.items():
        got = mod.digests(ds, method, backend)
        if (backend, method) in _PLATFORM_MATH:
            assert got["order"] == want["order"], f"{name} {backend} {method}: orders changed"
            _close_to_cpp(ds, method, backend)
            continue
        assert got == want, f"{name} {backend} {method}: results changed"
    ev = evaluate(ds, ["random", *list(pinned), "oracle"], backend=backend).to_dict()
    assert {"all": ev["all"], "mixed": ev["mixed"]} == entry["evaluate"][backend]


def _close_to_cpp(ds, method, backend):
    """Every float field within the contract's ACES-O tolerance of cpp's."""
    import numpy as np

    for prob in ds:
        got = af.rerank(prob.B, method, backend=backend)
        ref = af.rerank(prob.B, method, backend="cpp")
        for field in ("scores", "weights", "objective"):
            a, b = getattr(got, field), getattr(ref, field)
            a = np.asarray(a.detach().cpu().numpy() if hasattr(a, "detach") else a, np.float64)
            np.testing.assert_allclose(
                a,
                np.asarray(b, np.float64),
                rtol=0,
                atol=_ACES_O_TOL,
                err_msg=f"{prob.task_id} {backend} {method} {field}",
            )
