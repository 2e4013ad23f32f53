"""The vectorized C++ kernels (csrc/simd/): every instruction-set variant of every
kernel gives bitwise the same results, and the row scores follow their
documented summation order.

``ACES_FAST_SIMD=avx512|avx2|none`` caps the variant of every dispatched kernel
(read once per process), so each level this CPU supports runs the same workload
in its own subprocess and the outputs are compared byte for byte. The workload
reaches every dispatched kernel: the uniform LOO-AUC level step and block
(with and without row counts; AVX-512 runs whole column blocks in registers),
the weighted LOO-AUC row scores, the column sums, row packing (dedup), the
32-way row dot products (method scores), the rank sort of the scores, both surrogate kernels
(``ACES_FAST_SURROGATE_KERNEL=rows|columns``; AVX-512 runs the per-column one
with up to 32 kept rows in registers, the other levels the generic code) and
their ACES-O fits, the masked sums of the surrogate's scores and gradient, the
Adam update, and max_byte.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from helpers import (
    NARROW_SIZES,
    SIMD_LEVELS,
    narrow_lane_inputs,
    random_matrix,
    run_at_level,
    simd_levels_here,
)

_core = pytest.importorskip("aces_fast._core", reason="the C++ extension is not built")

LEVELS = SIMD_LEVELS

# Column counts around every vector width and tail the kernels special-case
# (4, 8, 16, 32, 64 lanes or bytes, the 512-column blocks), rows with and without
# repeats, bytes other than 1; 32 rows is the most the per-column surrogate keeps
# in registers (one to four vectors of inner rows).
SHAPES = [
    (1, 1),
    (3, 7),
    (9, 8),
    (17, 15),
    (24, 16),
    (30, 31),
    (40, 32),
    (33, 33),
    (50, 63),
    (64, 64),
    (70, 65),
    (24, 100),
    (120, 129),
    (200, 500),
    (11, 517),
    (32, 41),
    # the sort of the scores: AVX-512 ranks blocks of eight keys, at most 128 of
    # them, the other levels make radix passes (one up to 256 keys); few tests,
    # so ties
    (25, 3),
    (128, 9),
    (129, 6),
    (257, 6),
    # majority vote's column sums count 252 rows a block in byte lanes, four
    # rows a step: two whole blocks and a tail of one row
    (505, 70),
]

# Runs the workload at the SIMD level of its environment and prints
# {"level": ..., "<shape index>": {"<output name>": "<dtype>:<hex bytes>"}}.
# argv: shapes (JSON), then "permute" to permute the columns of every input and
# un-permute the per-column outputs (same values up to rounding, other bits).
_WORKER = r"""
import json, os, sys
import numpy as np
from aces_fast import _core as core

shapes = json.loads(sys.argv[1])
permute = len(sys.argv) > 2 and sys.argv[2] == "permute"

def inputs(t, n, m):
    rng = np.random.default_rng(1000 + t)
    B = (rng.random((n, m)) < rng.uniform(0.2, 0.6)).astype(np.uint8)
    if n > 4:
        B[rng.integers(0, n, n // 3)] = B[rng.integers(0, n, n // 3)]  # repeated rows
    if n > 2 and m > 3:
        # near-constant columns (the last one too): a column sum off by one
        # changes which tests count
        B[:, -1] = 0
        B[rng.integers(0, n), -1] = 1
        B[:, 1] = 1
        B[rng.integers(0, n), 1] = 0
        B[:, 2] = 0  # constant
    w = rng.random(m)
    wtie = rng.integers(1, 6, m) * 0.1  # sums of tenths: ties decided by rounding
    counts = rng.integers(0, 4, n)
    return B, w, wtie, counts

def record(out, name, x, per_column=False, inv=None):
    if x is None:
        out[name] = None
        return
    x = np.asarray(x)
    if per_column and inv is not None:
        x = x[..., inv]
    x = np.ascontiguousarray(x)
    out[name] = f"{x.dtype.str}{x.shape}:{x.tobytes().hex()}"

def kernel(name):
    os.environ["ACES_FAST_SURROGATE_KERNEL"] = name  # read by each surrogate set-up

result = {"level": core.simd_level()}
for t, (n, m) in enumerate(shapes):
    B, w, wtie, counts = inputs(t, n, m)
    inv = None
    if permute:
        perm = np.random.default_rng(t).permutation(m)
        B, w, wtie = np.ascontiguousarray(B[:, perm]), w[perm], wtie[perm]
        inv = np.argsort(perm)
    out = {}
    col = dict(per_column=True, inv=inv)
    for dedup in (False, True):
        for cname, c in (("", None), ("counts", counts)):
            tag = f"{cname}{'/dedup' if dedup else ''}"
            record(out, f"loo_auc uniform {tag}",
                   core.loo_auc(B=B, weights=None, counts=c, tie_tol=1e-9, n_threads=1,
                                dedup=dedup), **col)
            record(out, f"loo_auc weighted {tag}",
                   core.loo_auc(B=B, weights=w, counts=c, tie_tol=1e-9, n_threads=1,
                                dedup=dedup), **col)
            # tie_tol 0: exact float ties, so the bits of every row score matter
            record(out, f"loo_auc tenths tie_tol=0 {tag}",
                   core.loo_auc(B=B, weights=wtie, counts=c, tie_tol=0.0, n_threads=1,
                                dedup=dedup), **col)
    for kern in ("rows", "columns"):
        kernel(kern)
        for gamma in (10.0, 3.0):
            for cname, c in (("", None), ("counts", counts)):
                L, J, grad = core.surrogate_loo_auc(B=B, weights=w, gamma=gamma, counts=c,
                                                    n_threads=1, dedup=False)
                tag = f"{kern} gamma={gamma} {cname}"
                record(out, f"surrogate L {tag}", L, **col)
                record(out, f"surrogate J {tag}", np.float64(J))
                record(out, f"surrogate grad {tag}", grad, **col)
        for top_k, warm in ((None, False), (8, True)):
            r = core.rerank(B=B, method=core.METHOD_CODES["aces-o"], tie_tol=1e-9, gamma=10.0,
                            lr=0.05, steps=4, top_k=top_k, warm=warm, dedup=None, power=None, n_threads=1)
            tag = f"{kern} top_k={top_k} warm={warm}"
            record(out, f"aces-o scores {tag}", r[0])
            record(out, f"aces-o weights {tag}", r[1], **col)
            record(out, f"aces-o order {tag}", r[2])
            record(out, f"aces-o objective {tag}", r[5])
    kernel("auto")
    for method in ("majority", "aces-c", "aces-c-filter"):
        for dedup in (False, True):
            r = core.rerank(B=B, method=core.METHOD_CODES[method], tie_tol=1e-9, gamma=10.0,
                            lr=0.01, steps=0, top_k=None, warm=False, dedup=dedup, power=None, n_threads=1)
            tag = f"{method} dedup={dedup}"
            record(out, f"{tag} scores", r[0])
            record(out, f"{tag} weights", r[1], **col)
            record(out, f"{tag} order", r[2])
            record(out, f"{tag} loo_auc", r[3], **col)
    # the same from bit-packed rows (ACES-C reads only the packed words where the
    # level has the kernel), and a padding bit in the last row
    data = np.packbits(B != 0, axis=1).reshape(-1)
    for method in ("majority", "aces-c"):
        r = core.rerank_packed(data=data, offsets=np.array([0, data.size]), n=np.array([n]),
                               m=np.array([m]), method=core.METHOD_CODES[method], tie_tol=1e-9,
                               gamma=10.0, lr=0.01, steps=0, top_k=None, warm=False, dedup=None,
                               power=None, n_threads=1)
        record(out, f"{method} packed scores", r[0])
        record(out, f"{method} packed order", r[2])
        record(out, f"{method} packed loo_auc", r[3], **col)
        if m % 8:
            bad = data.copy()
            bad[-1] |= 1
            r = core.rerank_packed(data=bad, offsets=np.array([0, bad.size]), n=np.array([n]),
                                   m=np.array([m]), method=core.METHOD_CODES[method],
                                   tie_tol=1e-9, gamma=10.0, lr=0.01, steps=0, top_k=None,
                                   warm=False, dedup=None, power=None, n_threads=1)
            record(out, f"{method} packed padding", r[-1].astype(np.int64))
    # bytes other than 1 (read as passes, or rejected: the same at every level)
    scaled = B * np.where(np.random.default_rng(t).random(B.shape) < 0.1, 7, 1).astype(np.uint8)
    for dedup in (False, True):
        for method in ("majority", "aces-c"):
            try:
                r = core.rerank(B=scaled, method=core.METHOD_CODES[method], tie_tol=1e-9,
                                gamma=10.0, lr=0.01, steps=0, top_k=None, warm=False,
                                dedup=dedup, power=None, n_threads=1)
            except ValueError:
                r = (None, None)
            record(out, f"{method} dedup={dedup} bytes>1 scores", r[0])
            record(out, f"{method} dedup={dedup} bytes>1 weights", r[1], **col)
    if hasattr(core, "max_byte"):
        C = B.copy()
        C.flat[-1] = 7  # the last byte, in the vector tail for most shapes
        record(out, "max_byte", np.int64([core.max_byte(B), core.max_byte(C)]))
    result[str(t)] = out
print(json.dumps(result))
"""

# Outputs of float kernels whose bits depend on the summation order: permuting
# the columns must change some of them (see test_the_comparison_sees_one_rounding).
_ORDER_SENSITIVE = (
    "loo_auc tenths tie_tol=0",
    "surrogate L",
    "surrogate grad",
    "aces-c dedup=False scores",
)


def _run(level: str, *args: str) -> dict:
    return run_at_level(
        level, _WORKER, json.dumps(SHAPES), *args, unset=("ACES_FAST_SURROGATE_KERNEL",)
    )


def _differences(a: dict, b: dict) -> list:
    """(shape, output name) of every output whose bytes differ."""
    diff = []
    for t, shape in enumerate(SHAPES):
        ra, rb = a[str(t)], b[str(t)]
        assert ra.keys() == rb.keys()
        diff += [(shape, name) for name in ra if ra[name] != rb[name]]
    return diff


@pytest.fixture(scope="module")
def runs():
    """The workload's outputs at every SIMD level this CPU supports."""
    return {lv: _run(lv) for lv in simd_levels_here()}


def test_simd_level_reported():
    assert _core.simd_level() in LEVELS


def test_the_cap_is_honoured(runs):
    # a CPU without AVX2 reports "none" for every cap
    assert {lv: out["level"] for lv, out in runs.items()} == {lv: lv for lv in runs}


def test_every_simd_variant_gives_the_same_bits(runs):
    ref = runs["none"]
    assert len(ref["0"]) > 50  # the workload ran (every output is compared below)
    for lv in runs:
        diff = _differences(runs[lv], ref)
        assert not diff, f"{lv} differs from the portable variants: {diff[:10]}"


def _decode(s: str) -> np.ndarray:
    head, data = s.split(":")
    return np.frombuffer(bytes.fromhex(data), dtype=np.dtype(head[: head.index("(")]))


def test_the_comparison_sees_one_rounding(runs):
    """The byte comparison above can fail: the same workload on column-permuted
    inputs (a different summation order, the way a variant with another lane
    association or a fused multiply-add would round) is flagged in every
    order-sensitive float output, although the surrogate values agree to 1e-9."""
    level = max(runs, key=LEVELS.index)
    permuted = _run(level, "permute")
    diff = _differences(permuted, runs[level])
    for prefix in _ORDER_SENSITIVE:
        assert any(name.startswith(prefix) for _, name in diff), prefix
    for t, shape in enumerate(SHAPES):
        for name, a in permuted[str(t)].items():
            if name.startswith(("surrogate L", "surrogate grad")):
                b = runs[level][str(t)][name]
                np.testing.assert_allclose(
                    _decode(a), _decode(b), rtol=1e-9, atol=1e-12, err_msg=f"{name} at {shape}"
                )
    # integer-valued results do not depend on the order at all
    for t in range(len(SHAPES)):
        for name in permuted[str(t)]:
            if name.startswith(("loo_auc uniform", "max_byte")):
                assert permuted[str(t)][name] == runs[level][str(t)][name], name


def _dot_nibbles(row: np.ndarray, w: np.ndarray) -> float:
    """The documented association of the C++ row scores (simd.hpp's RowsDot), in
    plain Python floats: per group of four columns the weights of its passes in
    ascending order from +0.0; per 64-column word those group sums in ascending
    order; then the word sums in ascending order onto +0.0."""
    m = row.shape[0]
    total = 0.0
    for q in range(0, m, 64):
        word = None
        for g in range(q, min(q + 64, m), 4):
            group = 0.0
            for j in range(g, min(g + 4, m)):
                if row[j]:
                    group += float(w[j])
            word = group if word is None else word + group
        total += word
    return total


# Row counts cover the kernels' blocks (32 rows, then 8 with a padded last one)
# and, at 600, several 256-row chunks on two threads, each packing its own rows
# when there is no dedup plan.
@pytest.mark.parametrize(
    "shape",
    [(12, 1), (20, 31), (25, 64), (30, 97), (41, 300), (70, 1029), (600, 77)],
    ids=lambda s: f"{s[0]}x{s[1]}",
)
def test_aces_c_scores_follow_the_documented_association(shape):
    from aces_fast._semantics import snap_ties
    from aces_fast.backends.base import ArrayBackend

    B = random_matrix(np.random.default_rng(shape[1]), *shape, density=0.5, dup_rows=5)
    for dedup, threads in ((True, 1), (False, 1), (True, 2), (False, 2)):
        scores, weights, order, *_ = _core.rerank(
            B=B,
            method=_core.METHOD_CODES["aces-c"],
            tie_tol=1e-9,
            gamma=10.0,
            lr=0.01,
            steps=0,
            top_k=None,
            warm=False,
            dedup=dedup,
            power=None,
            n_threads=threads,
        )
        raw = np.array([_dot_nibbles(row, weights) for row in B])
        expected = snap_ties(ArrayBackend, raw, 1e-9 * float(np.sum(weights)))
        np.testing.assert_array_equal(scores, expected)
        np.testing.assert_array_equal(order, np.lexsort((np.arange(B.shape[0]), -expected)))


def test_large_scores_follow_the_documented_association():
    """Past the packed-word budget (kKeepPackedWords) the dedup pass does not keep
    its packed rows and the scores pack each chunk again: the same association,
    with and without dedup, on one and two threads (tie_tol = 0 leaves the raw
    scores unsnapped; a sample of rows is checked against the Python model)."""
    rng = np.random.default_rng(7)
    B = random_matrix(rng, 2100, 1000, density=0.5, dup_rows=40)  # 2100 * 16 > 2**15 words
    sample = rng.choice(B.shape[0], 25, replace=False)
    runs = []
    for dedup, threads in ((True, 1), (False, 1), (True, 2), (False, 2)):
        scores, weights, *_ = _core.rerank(
            B=B,
            method=_core.METHOD_CODES["aces-c"],
            tie_tol=0.0,
            gamma=10.0,
            lr=0.01,
            steps=0,
            top_k=None,
            warm=False,
            dedup=dedup,
            power=None,
            n_threads=threads,
        )
        expected = [_dot_nibbles(B[i], weights) for i in sample]
        np.testing.assert_array_equal(scores[sample], expected)
        runs.append(scores)
    for other in runs[1:]:
        np.testing.assert_array_equal(other, runs[0])


@pytest.mark.parametrize("shape", [(1, 1), (3, 21), (7, 64), (9, 130), (200, 500)])
def test_max_byte_finds_any_bad_value(shape):
    """Every call checks B with the max_byte kernel; a single large byte anywhere
    (including the tail past the last 64) is found and named."""
    rng = np.random.default_rng(sum(shape))
    B = random_matrix(rng, *shape, density=0.5)
    kw = dict(weights=None, counts=None, tie_tol=1e-9, dedup=None, n_threads=1)
    _core.loo_auc(B=B, **kw)
    for pos in {0, B.size // 2, B.size - 1}:
        for value in (2, 200):
            C = B.copy()
            C.flat[pos] = value
            with pytest.raises(ValueError, match=f"found value {value}$"):
                _core.loo_auc(B=C, **kw)
            with pytest.raises(ValueError, match=f"found value {value}$"):
                _core.loo_auc(B=C.view(np.bool_), **kw)


# Every bad byte is found by rerank's own check, at every SIMD level: inside the
# row-dedup pass (the packing kernel flags bytes other than 0/1) or, without
# dedup, by the max_byte pass; positions cover the first byte, a full 64-byte
# word, the tail past the last full word, and a repeated row.
_CHECK_WORKER = r"""
import json, sys
import numpy as np
from aces_fast import _core as core

missed = []
for n, m in json.loads(sys.argv[1]):
    rng = np.random.default_rng(n * 1000 + m)
    B = (rng.random((n, m)) < 0.5).astype(np.uint8)
    if n > 2:
        B[n - 1] = B[0]
    positions = sorted({0, min(63, m - 1), m * (n // 2) + m - 1, (n - 1) * m + (m - 1) // 2,
                        B.size - 1})
    for method, code in sorted(core.METHOD_CODES.items()):
        for dedup in (True, False, None):
            kw = dict(method=code, tie_tol=1e-9, gamma=10.0, lr=0.05, steps=2, top_k=None,
                      warm=True, dedup=dedup, power=np.arange(B.shape[0] + 1.0) ** 0.5, n_threads=1)
            core.rerank(B=B, **kw)
            for pos in positions:
                for value in (2, 255):
                    C = B.copy()
                    C.flat[pos] = value
                    for arr in (C, C.view(np.bool_)):
                        try:
                            core.rerank(B=arr, **kw)
                            missed.append([n, m, method, dedup, pos, value, "no error"])
                        except ValueError as exc:
                            if not str(exc).endswith(f"found value {value}"):
                                missed.append([n, m, method, dedup, pos, value, str(exc)])
print(json.dumps({"level": core.simd_level(), "missed": missed}))
"""


# A bad byte in every column of a short row, for every tail length of the
# packing kernel's last partial word (its 32-, 16-, 8- and 1-byte steps).
_COLUMN_WORKER = r"""
import json, sys
import numpy as np
from aces_fast import _core as core

missed = []
kw = dict(method=core.METHOD_CODES["aces-c"], tie_tol=1e-9, gamma=10.0, lr=0.05, steps=0,
          top_k=None, warm=False, dedup=True, power=None, n_threads=1)
for m in json.loads(sys.argv[1]):
    B = (np.random.default_rng(m).random((3, m)) < 0.5).astype(np.uint8)
    B[2] = B[0]
    for j in range(m):
        C = B.copy()
        C[1, j] = 2
        try:
            core.rerank(B=C, **kw)
            missed.append([m, j])
        except ValueError:
            pass
print(json.dumps({"level": core.simd_level(), "missed": missed}))
"""


@pytest.mark.parametrize("level", LEVELS)
def test_packing_finds_a_bad_byte_in_every_column(level):
    if level not in simd_levels_here():
        pytest.skip(f"this CPU does not run the {level} variants")
    widths = [*range(1, 73), 100, 127, 128, 129, 191]
    assert _missed_at_level(level, _COLUMN_WORKER, widths) == []


def _worker_output(level: str, worker: str, cases: list) -> dict:
    """Run a worker on ``cases`` at one SIMD level (one thread); its JSON output."""
    return run_at_level(level, worker, json.dumps(cases))


def _missed_at_level(level: str, worker: str, cases: list) -> list:
    """Run a bad-byte worker at one SIMD level (one thread); its misses."""
    out = _worker_output(level, worker, cases)
    assert out["level"] == level
    return out["missed"]


@pytest.mark.parametrize("level", LEVELS)
def test_rerank_finds_every_bad_byte_at_every_level(level):
    if level not in simd_levels_here():
        pytest.skip(f"this CPU does not run the {level} variants")
    shapes = [(2, 1), (3, 7), (9, 64), (12, 130), (40, 500), (17, 517)]
    assert _missed_at_level(level, _CHECK_WORKER, shapes) == []


def test_rerank_check_on_threads_and_in_batches():
    """The dedup pass of a large matrix runs on two threads, each flagging its own
    rows; a batch reports its lowest bad task, whichever thread ran it."""
    rng = np.random.default_rng(7)
    B = (rng.random((600, 700)) < 0.5).astype(np.uint8)  # n m above the parallel threshold
    kw = dict(
        tie_tol=1e-9,
        gamma=10.0,
        lr=0.05,
        steps=2,
        top_k=24,
        warm=True,
        dedup=True,
        power=None,
        n_threads=2,
    )
    for code in (_core.METHOD_CODES["aces-c"], _core.METHOD_CODES["aces-o"]):
        _core.rerank(B=B, method=code, **kw)
        for pos in (0, B.size // 2 + 3, B.size - 1):
            C = B.copy()
            C.flat[pos] = 3
            with pytest.raises(ValueError, match=r"^B must contain only 0 and 1; found value 3$"):
                _core.rerank(B=C, method=code, **kw)
    small = [(rng.random((30, 200)) < 0.5).astype(np.uint8) for _ in range(9)]
    for bad_tasks in ([8], [3, 5], [0, 8]):
        tasks = [t.copy() for t in small]
        for k in bad_tasks:
            tasks[k][k, 2 * k] = 4 + k
        first = bad_tasks[0]
        with pytest.raises(
            ValueError,
            match=rf"^task {first}: B must contain only 0 and 1; "
            rf"found value {4 + first}$",
        ):
            _core.rerank_batch(
                tasks=tasks, method=_core.METHOD_CODES["aces-c"], **{**kw, "dedup": None}
            )


# The uniform LOO-AUC of the inputs of test_uniform_loo_auc_in_narrow_lanes_is_exact
# at the SIMD level of the environment: {"level", "<n>/<counts>": hex of float64}.
_NARROW_WORKER = r"""
import json, sys
import numpy as np
from aces_fast import _core
sys.path.insert(0, sys.argv[2])
from helpers import narrow_lane_inputs
out = {"level": _core.simd_level()}
for n in json.loads(sys.argv[1]):
    for with_counts in (False, True):
        B, counts = narrow_lane_inputs(n, with_counts)
        r = _core.loo_auc(B=B, weights=None, counts=counts, tie_tol=1e-9, n_threads=1, dedup=False)
        out[f"{n}/{with_counts}"] = np.ascontiguousarray(r).tobytes().hex()
print(json.dumps(out))
"""


@pytest.mark.parametrize("level", LEVELS)
def test_uniform_loo_auc_in_narrow_lanes_is_exact(level):
    """AVX-512 and AVX2 count the uniform LOO-AUC in 16-bit lanes while the total
    multiplicity is at most 361 (2 wins + ties <= 361^2 / 2 < 2^16) and in 32-bit
    lanes above: both sides of the switch, at every level, equal the exact
    reference."""
    import aces_fast as af

    if level not in simd_levels_here():
        pytest.skip(f"this CPU does not run the {level} variants")
    here = os.path.dirname(os.path.abspath(__file__))
    got = run_at_level(level, _NARROW_WORKER, json.dumps(NARROW_SIZES), here)
    assert got["level"] == level
    for n in NARROW_SIZES:
        for with_counts in (False, True):
            B, counts = narrow_lane_inputs(n, with_counts)
            rows = B if counts is None else np.repeat(B, counts, axis=0)
            want = af.loo_auc(rows, backend="numpy")
            res = np.frombuffer(bytes.fromhex(got[f"{n}/{with_counts}"]), dtype=np.float64)
            np.testing.assert_array_equal(res, want, err_msg=f"n={n} counts={with_counts}")


# Runs the uniform LOO-AUC and ACES-C on matrices whose last byte sits just
# before a page that may not be read (PROT_NONE): a kernel that reads past the
# matrix dies of SIGSEGV. Prints {"<n>x<m>": {"loo": hex, "order": hex}}.
_GUARD_WORKER = r"""
import ctypes, json, mmap, sys
import numpy as np
from aces_fast import _core as core
import aces_fast as af

libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
page = mmap.PAGESIZE
out = {}
for n, m in json.loads(sys.argv[1]):
    size = -(-(n * m) // page) * page
    buf = mmap.mmap(-1, size + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    assert libc.mprotect(base + size, page, 0) == 0  # PROT_NONE
    B = np.frombuffer(buf, np.uint8, count=n * m, offset=size - n * m).reshape(n, m)
    rng = np.random.default_rng(n * 1000 + m)
    B[...] = rng.random((n, m)) < 0.5
    loo = core.loo_auc(B=B, weights=None, counts=None, tie_tol=1e-9, n_threads=1, dedup=False)
    res = af.rerank(B, "aces-c", backend="cpp")
    out[f"{n}x{m}"] = {"loo": np.asarray(loo).tobytes().hex(), "order": res.order.tobytes().hex()}
    del B, loo, res
print(json.dumps(out))
"""

# Column counts whose last block is short, one row and many, rows with equal sums.
GUARD_SHAPES = [(1, 10), (3, 50), (24, 100), (40, 129), (7, 64), (200, 190)]


@pytest.mark.skipif(sys.platform == "win32", reason="mprotect is POSIX")
@pytest.mark.parametrize("level", LEVELS)
def test_short_column_blocks_read_nothing_past_the_matrix(level):
    """No kernel reads past the matrix (a vector load of a short column block
    would): on a matrix that ends where an unreadable page begins, every level
    runs and equals the reference."""
    import aces_fast as af

    if level not in simd_levels_here():
        pytest.skip(f"this CPU does not run the {level} variants")
    got = _worker_output(level, _GUARD_WORKER, GUARD_SHAPES)
    for n, m in GUARD_SHAPES:
        B = (np.random.default_rng(n * 1000 + m).random((n, m)) < 0.5).astype(np.uint8)
        loo = np.frombuffer(bytes.fromhex(got[f"{n}x{m}"]["loo"]), dtype=np.float64)
        np.testing.assert_array_equal(loo, af.loo_auc(B, backend="numpy"), err_msg=f"{n}x{m}")
        order = np.frombuffer(bytes.fromhex(got[f"{n}x{m}"]["order"]), dtype=np.int64)
        np.testing.assert_array_equal(order, af.rerank(B, "aces-c", backend="numpy").order)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 251, 252, 253, 255, 256, 257, 504, 505, 1009])
def test_majority_counts_every_row_of_every_block(n):
    """Majority vote's column sums run in byte lanes over blocks of 252 rows, four
    rows a step (csrc/methods/methods.cpp). A test's weight depends on whether
    its sum is 0, n or in between, so each boundary row gets a test that only
    it passes (skipping that row makes the test constant), and all-pass and
    all-fail tests catch a byte lane that wraps. Weights and orders equal the
    numpy reference's, scores to its rounding."""
    import aces_fast as af

    rng = np.random.default_rng(n)
    rows = sorted({k for k in (0, 1, 3, 4, 251, 252, 253, 255, 256, 503, 504, n - 1) if k < n})
    m = 40 + len(rows)
    B = (rng.random((n, m)) < 0.5).astype(np.uint8)
    B[:, 0] = 1
    B[:, 1] = 0
    for c, k in enumerate(rows, start=40):
        B[:, c] = 0
        B[k, c] = 1
    got = af.majority_vote(B, backend="cpp")
    want = af.majority_vote(B, backend="numpy")
    np.testing.assert_array_equal(got.weights, want.weights)
    np.testing.assert_array_equal(got.order, want.order)
    np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-12)
    assert got.weights[0] == got.weights[1] == 0.0  # constant tests
    assert (got.weights[40:] > 0).all() == (n > 1)  # each passed by one row of n


@pytest.mark.parametrize("lead", [0, 63, 64, 65, 130])
def test_majority_finds_the_first_weighted_test_past_whole_words(lead):
    """The equal-weight scores build the mask of weighted tests 64 at a time and
    take the common weight from the first nonzero one: tests that carry no
    weight (constant) may fill whole 64-test words before it."""
    import aces_fast as af

    rng = np.random.default_rng(lead)
    B = (rng.random((37, lead + 75)) < 0.5).astype(np.uint8)
    B[:, :lead] = rng.random(lead) < 0.5  # constant tests: weight 0
    got = af.majority_vote(B, backend="cpp")
    want = af.majority_vote(B, backend="numpy")
    assert (got.weights[:lead] == 0).all() and (got.weights[lead:] > 0).any()
    np.testing.assert_array_equal(got.weights, want.weights)
    np.testing.assert_array_equal(got.order, want.order)
    np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-12)
