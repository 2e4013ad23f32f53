"""The hand-vectorized C++ kernels (csrc/simd.cpp): every instruction-set variant
gives bitwise the same results, and the row scores follow their documented
summation order.

``ACES_FAST_SIMD=avx2|none`` caps the variant the extension picks (read once per
process), so each variant this CPU supports runs in its own subprocess and the
outputs are compared bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import random_matrix

_core = pytest.importorskip("aces_fast._core", reason="the C++ extension is not built")

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("none", "avx2", "avx512")

# Column counts around every vector width and tail the kernels special-case
# (8, 16, 32, 64 lanes/bytes), rows with and without repeats, bytes other than 1.
SHAPES = [(1, 1), (3, 7), (9, 8), (17, 15), (24, 16), (30, 31), (40, 32), (33, 33),
          (50, 63), (64, 64), (70, 65), (24, 100), (120, 129), (200, 500)]

_WORKER = r"""
import json, sys
import numpy as np
from aces_fast._compiled import core

def matrices():
    rng = np.random.default_rng(7)
    for n, m in json.loads(sys.argv[1]):
        B = (rng.random((n, m)) < 0.45).astype(np.uint8)
        if n > 4:
            B[rng.integers(0, n, n // 3)] = B[rng.integers(0, n, n // 3)]  # repeats
        B[rng.random((n, m)) < 0.05] *= np.uint8(7)  # nonzero bytes other than 1 pass too
        yield B

out = {"level": core.simd_level()}
for t, B in enumerate(matrices()):
    m = B.shape[1]
    w = np.random.default_rng(t).random(m)
    counts = np.random.default_rng(t + 1).integers(0, 4, B.shape[0])
    res = [core.loo_auc(B, None, None, n_threads=1), core.loo_auc(B, None, counts, n_threads=1),
           core.loo_auc(B, w, None, n_threads=1)]
    for method in ("majority", "aces-c", "aces-c-filter", "aces-o"):
        for dedup in (True, False):
            r = core.rerank(B, core.METHOD_CODES[method], 1e-9, 10.0, 0.01, 5, 8, False,
                            dedup, 1)
            res += [x for x in r if isinstance(x, np.ndarray)]
    out[str(t)] = [np.asarray(x, dtype=np.float64).tobytes().hex() for x in res]
print(json.dumps(out))
"""


def _supported_levels():
    best = _core.simd_level()
    return LEVELS[: LEVELS.index(best) + 1]


def _run(level: str) -> dict:
    env = dict(os.environ, ACES_FAST_SIMD=level, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", _WORKER, json.dumps(SHAPES)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_simd_level_reported():
    assert _core.simd_level() in LEVELS


def test_every_simd_variant_gives_the_same_bits():
    levels = _supported_levels()
    runs = {lv: _run(lv) for lv in levels}
    for lv, out in runs.items():
        # the cap is honoured (a CPU without AVX2 reports "none" for every cap)
        assert out.pop("level") == lv
    ref = runs["none"]
    for lv in levels[1:]:
        for t, (n, m) in enumerate(SHAPES):
            assert runs[lv][str(t)] == ref[str(t)], f"{lv} differs from portable at {n}x{m}"


def _dot32(row: np.ndarray, w: np.ndarray) -> float:
    """The documented association of the C++ row scores, in plain Python floats."""
    part = [0.0] * 32
    for j in range(row.shape[0]):
        part[j % 32] += float(w[j]) if row[j] else 0.0
    h = 16
    while h >= 1:
        for lane in range(h):
            part[lane] += part[lane + h]
        h //= 2
    return part[0]


@pytest.mark.parametrize("shape", [(12, 1), (20, 31), (25, 64), (30, 97), (40, 300)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_aces_c_scores_follow_the_documented_association(shape):
    from aces_fast._semantics import snap_ties
    from aces_fast.backends.base import ArrayBackend

    B = random_matrix(np.random.default_rng(shape[1]), *shape, density=0.5, dup_rows=5)
    for dedup in (True, False):
        scores, weights, order, *_ = _core.rerank(B, _core.METHOD_CODES["aces-c"], 1e-9, 10.0,
                                                  0.01, 0, None, False, dedup, 1)
        raw = np.array([_dot32(row, weights) for row in B])
        expected = snap_ties(ArrayBackend, raw, 1e-9 * float(np.sum(weights)))
        np.testing.assert_array_equal(scores, expected)
        np.testing.assert_array_equal(order, np.lexsort((np.arange(B.shape[0]), -expected)))


def test_nonzero_bytes_count_as_passes():
    """The packers and the level step read any nonzero byte as a pass (bool views,
    direct calls with other byte values)."""
    rng = np.random.default_rng(3)
    B = random_matrix(rng, 60, 150, density=0.4, dup_rows=10)
    scaled = B * rng.integers(1, 256, B.shape).astype(np.uint8)
    assert (scaled[B == 1] > 0).all() and scaled.max() > 1
    for method in ("aces-c", "majority", "aces-o"):
        a = _core.rerank(B, _core.METHOD_CODES[method], 1e-9, 10.0, 0.01, 4, 10, False, None, 1)
        b = _core.rerank(scaled, _core.METHOD_CODES[method], 1e-9, 10.0, 0.01, 4, 10, False,
                         None, 1)
        for x, y in zip(a, b):
            if isinstance(x, np.ndarray):
                np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(_core.loo_auc(B), _core.loo_auc(scaled))


@pytest.mark.parametrize("shape", [(1, 0), (1, 1), (3, 21), (7, 64), (9, 130), (200, 500)])
def test_max_byte_matches_numpy(shape):
    rng = np.random.default_rng(sum(shape))
    B = random_matrix(rng, *shape, density=0.5)
    assert _core.max_byte(B) == (B.max() if B.size else 0)
    if B.size:
        # a single large byte anywhere (including the tail past the last 64) is found
        for pos in {0, B.size // 2, B.size - 1}:
            C = B.copy()
            C.flat[pos] = 200
            assert _core.max_byte(C) == 200
        assert _core.max_byte(B.astype(bool)) == B.max()
    with pytest.raises(TypeError):
        _core.max_byte(B.astype(np.int64))
