"""CodeT's compiled copy (csrc/methods/methods.cpp, run_codet): the consensus
sets of identical rows, each row scoring its passes of the non-constant tests
times its set's size ** exponent, read from a table NumPy computes
(``_registry.power_table``). It must equal the NumPy reference bit for bit --
scores and order -- in a single call, a batch (list, stack, any thread count)
and a bit-packed batch, and the reference must equal brute force."""

from __future__ import annotations

import numpy as np
import pytest

import aces_fast as af
import core_calls
from aces_fast import _registry
from aces_fast._compiled import core
from aces_fast.backends.cpp import _method_kwargs
from brute import codet as brute_codet
from helpers import require_backend

pytestmark = pytest.mark.usefixtures("_cpp")

EXPONENTS = (0.0, 0.5, 1.0, 2.0, 3.7, 16.0)


@pytest.fixture(scope="module")
def _cpp():
    require_backend("cpp")


def families(seed):
    """Pass matrices where CodeT's sets matter: Bernoulli rows, few distinct rows
    (large sets), constant tests (all-pass and all-fail columns), no tests, one
    candidate, every row alike."""
    rng = np.random.default_rng(seed)
    out = []
    for n, m in ((1, 5), (2, 3), (7, 1), (24, 100), (60, 9), (130, 70), (300, 130)):
        out.append((rng.random((n, m)) < rng.uniform(0.1, 0.9)).astype(np.uint8))
        few = (rng.random((max(1, n // 8), m)) < 0.5).astype(np.uint8)
        out.append(few[rng.integers(0, len(few), n)])  # repeated rows
    B = (rng.random((40, 20)) < 0.5).astype(np.uint8)
    B[:, 3] = 1  # every candidate passes: constant, left out of the passes
    B[:, 7] = 0
    out.append(B)
    out.append(np.zeros((9, 0), np.uint8))  # no tests: one set of all 9
    out.append(np.ones((6, 4), np.uint8))  # every row alike, every test constant
    return out


def same(got, want, what):
    np.testing.assert_array_equal(
        np.asarray(got.scores).view(np.uint64), np.asarray(want.scores).view(np.uint64), what
    )
    np.testing.assert_array_equal(np.asarray(got.order), np.asarray(want.order), what)
    assert got.weights is None and got.method == want.method and got.info == want.info


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_a_call_equals_the_reference_bit_for_bit(exponent):
    for k, B in enumerate(families(int(exponent * 10))):
        got = af.rerank(B, "codet", backend="cpp", exponent=exponent)
        want = af.rerank(B, "codet", backend="numpy", exponent=exponent)
        assert got.backend == "cpp"
        same(got, want, f"matrix {k} {B.shape}")


def test_the_reference_equals_brute_force():
    for k, B in enumerate(families(1)):
        for exponent in (0.5, 1.0, 2.0):
            want = brute_codet(B.tolist(), exponent)
            got = af.rerank(B, "codet", backend="cpp", exponent=exponent).scores
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, err_msg=str(k))


@pytest.mark.parametrize("method", ["codet", "codet-linear"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_equals_single_calls(method, threads):
    tasks = families(7)
    batch = af.rerank_batch(tasks, method, backend="cpp", n_threads=threads)
    assert batch.weights is None and batch.m_offsets is None
    assert batch.backend == "cpp"
    for k, (B, res) in enumerate(zip(tasks, batch)):
        same(res, af.rerank(B, method, backend="numpy"), f"task {k}")
    # one shape, as a stack ranked where it lies
    rng = np.random.default_rng(3)
    stack = (rng.random((50, 30, 12)) < 0.5).astype(np.uint8)
    stack[:, 1::3] = stack[:, :1]  # repeated rows in every task
    ranked = af.rerank_batch(stack, method, backend="cpp", n_threads=threads)
    for k, res in enumerate(ranked):
        same(res, af.rerank(stack[k], method, backend="numpy"), f"stack task {k}")


def test_a_packed_batch_equals_the_unpacked_one():
    from aces_fast.parquet import pack_rows

    tasks = [B for B in families(11) if B.shape[1] > 0]
    parts = [np.frombuffer(pack_rows(B), np.uint8) for B in tasks]
    off = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([p.size for p in parts], out=off[1:])
    n = np.array([B.shape[0] for B in tasks], np.int64)
    m = np.array([B.shape[1] for B in tasks], np.int64)
    # the keywords the cpp backend's batch paths pass
    kw = _method_kwargs(_registry.CODET, {"exponent": 0.5}, 2, lambda: int(n.max()))
    *got, padding = core.rerank_packed(data=np.concatenate(parts), offsets=off, n=n, m=m, **kw)
    want = core.rerank_batch_flat(tasks=tasks, **kw)
    assert not padding.any()
    for w, g in zip(want, got):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_array_equal(
                np.asarray(w).view(np.uint8), np.asarray(g).view(np.uint8)
            )


def test_the_power_table_is_numpys_power():
    table = _registry.power_table(0.5, 10)
    assert table.shape == (11,) and table.dtype == np.float64 and not table.flags.writeable
    np.testing.assert_array_equal(table, np.arange(11, dtype=np.float64) ** 0.5)
    assert _registry.power_table(0.5, 10) is table  # cached


def test_a_missing_or_short_power_table_is_an_error():
    B = np.eye(4, dtype=np.uint8)
    code = core.METHOD_CODES["codet"]
    with pytest.raises(ValueError, match="codet needs power"):
        core_calls.rerank(B, code)
    with pytest.raises(ValueError, match="needs n \\+ 1 = 5 entries for the largest task, got 4"):
        core_calls.rerank(B, code, power=np.arange(4.0))
    for batch in (core_calls.rerank_batch_flat, core_calls.rerank_batch):
        with pytest.raises(ValueError, match="needs n \\+ 1 = 5 entries"):
            batch([B[:3], B], code, power=np.arange(4.0))
    with pytest.raises(TypeError, match="power must be a 1-D C-contiguous float64 array"):
        core_calls.rerank(B, code, power=np.arange(5))


def test_bad_input_names_its_task():
    good = np.eye(3, dtype=np.uint8)
    with pytest.raises(ValueError, match="task 1: .*0 and 1"):
        af.rerank_batch([good, good * 2], "codet", backend="cpp")
    with pytest.raises(ValueError, match="0 and 1"):
        af.rerank(good * 3, "codet", backend="cpp")


def test_results_in_arrow_have_no_weights_column():
    pytest.importorskip("pyarrow")
    batch = af.rerank_batch(families(2)[:4], "codet", backend="cpp")
    table = batch.to_arrow()
    assert "weights" not in table.column_names
    assert table.column("scores").to_pylist()[1] == batch[1].scores.tolist()
