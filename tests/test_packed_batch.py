"""The packed fast path of dataset runs: ``_core.rerank_packed`` ranks the
bit-packed rows of a Parquet batch without unpacking them in Python, and
``_core.pass_at_ks`` computes their Pass@k columns; both must give exactly what
the general path (``decode_batch`` + ``rerank_batch`` + ``pass_at_ks``) gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aces_fast as af
from aces_fast import _engine
from aces_fast._compiled import core
from aces_fast._registry import method_params, power_table
from aces_fast.parquet import pack_rows, packed_batch, schema

COMPILED = {"majority": 0, "aces-c": 1, "aces-c-filter": 2, "aces-o": 3, "codet": 4}
KW = dict(
    tie_tol=1e-9, gamma=10.0, lr=0.05, steps=15, top_k=None, warm=False, dedup=None, power=None
)


def _kw(name, **extra):
    """The _core keywords of method ``name``: KW, its code and, for CodeT, its
    table of size ** 0.5 (enough for every task here)."""
    power = power_table(0.5, 70_000) if name == "codet" else None
    return dict(KW, method=COMPILED[name], **extra) | {"power": power}


# test counts around the packed rows' layouts: under 8 bytes (one partial
# word), 8 bytes, 9 to 15 (a whole word and a partial one), 16 and more
WIDTHS = (0, 1, 7, 8, 9, 17, 50, 56, 57, 64, 65, 72, 100, 120, 121)


def _tasks(rng, count=120):
    out = []
    for _ in range(count):
        n, m = int(rng.integers(1, 30)), int(rng.choice(WIDTHS))
        B = (rng.random((n, m)) < rng.random()).astype(np.uint8)
        if n > 3 and rng.random() < 0.3:  # repeated rows: the dedup path
            B[1::2] = B[0]
        out.append(B)
    return out


def _packed(Bs):
    parts = [np.frombuffer(pack_rows(B), np.uint8) for B in Bs]
    off = np.zeros(len(Bs) + 1, np.int64)
    np.cumsum([p.size for p in parts], out=off[1:])
    data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    n = np.array([B.shape[0] for B in Bs], np.int64)
    m = np.array([B.shape[1] for B in Bs], np.int64)
    return data, off, n, m


@pytest.mark.parametrize("name", sorted(COMPILED))
@pytest.mark.parametrize("threads", [1, 2])
def test_rerank_packed_equals_the_unpacked_batch(name, threads):
    Bs = _tasks(np.random.default_rng(COMPILED[name]))
    data, off, n, m = _packed(Bs)
    kw = _kw(name, n_threads=threads)
    want = core.rerank_batch_flat(tasks=Bs, **kw)
    *got, padding = core.rerank_packed(data=data, offsets=off, n=n, m=m, **kw)
    assert padding.dtype == bool and not padding.any()
    for w, g in zip(want, got):
        if w is None:
            assert g is None
        else:
            assert w.dtype == g.dtype
            np.testing.assert_array_equal(w.view(np.uint8), g.view(np.uint8))


def _constant_columns(rng, n, m):
    """A random n x m matrix whose columns 0, 63, 64 and m - 1 (those that
    exist) are constant: all passed or all failed, alternately."""
    B = (rng.random((n, m)) < rng.uniform(0.2, 0.8)).astype(np.uint8)
    for k, j in enumerate(sorted({j for j in (0, 63, 64, m - 1) if j < m})):
        B[:, j] = k % 2
    return B


@pytest.mark.parametrize("m", [1, 2, 63, 64, 65, 127, 128, 129, 200])
def test_equal_weight_methods_with_constant_columns(m):
    """Majority vote finds its constant tests from the OR and AND of the packed
    rows, and the equal-weight scores (majority, ACES-C filter) count each
    row's weighted passes word by word; columns at the edges of words and the
    last column, constant, must get weight 0 as the NumPy reference says, from
    bytes (with and without dedup) and from bit-packed rows alike."""
    rng = np.random.default_rng(m)
    Bs = [_constant_columns(rng, n, m) for n in (1, 2, 9, 40)]
    Bs.append(np.repeat(Bs[-1][:5], 8, axis=0))  # repeated rows: the dedup plan
    for name in ("majority", "aces-c-filter"):
        for B in Bs:
            want = af.rerank(B, name, backend="numpy")
            got = af.rerank(B, name, backend="cpp")
            np.testing.assert_array_equal(got.weights, want.weights)
            np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-12)
            np.testing.assert_array_equal(got.order, want.order)
            for dedup in (False, True):  # (the flat tuple: scores 2, weights 3, order 4)
                out = core.rerank_batch_flat(tasks=[B], **_kw(name, n_threads=1) | {"dedup": dedup})
                np.testing.assert_array_equal(out[2], got.scores)
                np.testing.assert_array_equal(out[3], got.weights)
                np.testing.assert_array_equal(out[4], got.order)
        data, off, n, m_ = _packed(Bs)
        kw = _kw(name, n_threads=1)
        *packed, padding = core.rerank_packed(data=data, offsets=off, n=n, m=m_, **kw)
        assert not padding.any()
        for w, g in zip(core.rerank_batch_flat(tasks=Bs, **kw), packed):
            if w is None:
                assert g is None
            else:
                np.testing.assert_array_equal(w.view(np.uint8), g.view(np.uint8))


@pytest.mark.parametrize("m", [1, 7, 50, 63, 100, 129])
@pytest.mark.parametrize("name", sorted(COMPILED))
def test_a_padding_bit_of_any_row_flags_its_task(m, name):
    """Every padding bit position of the first and the last row is found, for
    methods that unpack the rows and for ACES-C, which reads only their packed
    words (where the SIMD level has its kernel)."""
    rng = np.random.default_rng(m)
    Bs = [(rng.random((n, m)) < 0.5).astype(np.uint8) for n in (5, 40, 3)]
    data, off, n, m_ = _packed(Bs)
    nb = (m + 7) // 8
    for row in (0, 39):
        for bit in range(8 - m % 8 if m % 8 else 0):
            bad = data.copy()
            bad[off[1] + row * nb + nb - 1] |= 1 << bit
            *_, padding = core.rerank_packed(
                data=bad, offsets=off, n=n, m=m_, **_kw(name, n_threads=1)
            )
            assert padding.tolist() == [False, True, False], (row, bit)


def test_padding_bits_flag_their_task_only():
    Bs = [np.ones((3, 5), np.uint8), np.ones((2, 8), np.uint8), np.zeros((4, 3), np.uint8)]
    data, off, n, m = _packed(Bs)
    data[off[2] + 1] |= 0b00001  # task 2, row 1: a bit after column 3
    data[off[0]] |= 0  # task 0 untouched
    *_, padding = core.rerank_packed(data=data, offsets=off, n=n, m=m, method=1, n_threads=1, **KW)
    assert padding.tolist() == [False, False, True]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d, o, n, m: (d, o, n + np.array([0, 1]), m), "task 1: B has 2 bytes, need n"),
        (lambda d, o, n, m: (d, o, n, m + np.array([9, 0])), "task 0: B has"),
        # the largest n and m: n * ceil(m / 8) < 2**59, reported without overflow
        (
            lambda d, o, n, m: (d, o, np.array([2**31 - 1, 2]), np.array([2**31 - 1, 8])),
            "task 0: B has 3 bytes, need n \\* ceil\\(m / 8\\) = 576460752034988032",
        ),
        (lambda d, o, n, m: (d, o, np.array([0, 2]), m), r"task 0: n must be in \[1"),
        (lambda d, o, n, m: (d, o, n, np.array([-1, 8])), r"task 0: m must be in \[0"),
        (lambda d, o, n, m: (d[:-1], o, n, m), "task 1: offsets .* not inside data"),
        (lambda d, o, n, m: (d, o[::-1].copy(), n, m), "task 0: offsets"),
        (lambda d, o, n, m: (d, o[:-1].copy(), n, m), "offsets one more"),
    ],
)
def test_bad_packed_arguments_are_value_errors(change, match):
    data, off, n, m = _packed([np.ones((3, 5), np.uint8), np.ones((2, 8), np.uint8)])
    d, o, nn, mm = change(data, off, n, m)
    with pytest.raises(ValueError, match=match):
        core.rerank_packed(data=d, offsets=o, n=nn, m=mm, method=1, n_threads=1, **KW)


def test_packed_arguments_must_have_their_exact_dtype():
    data, off, n, m = _packed([np.ones((3, 5), np.uint8)])
    with pytest.raises(TypeError, match="offsets must be a 1-D C-contiguous int64"):
        core.rerank_packed(
            data=data, offsets=off.astype(np.int32), n=n, m=m, method=1, n_threads=1, **KW
        )


# -- Pass@k ----------------------------------------------------------------------


@st.composite
def _rankings(draw):
    T = draw(st.integers(1, 10))
    out = []
    for _ in range(T):
        n = draw(st.sampled_from([1, 2, 3, 5, 8, 13, 40]))
        levels = draw(st.integers(1, 5))
        s = draw(st.lists(st.integers(0, levels - 1), min_size=n, max_size=n))
        y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
        out.append((np.array(s, np.float64) / 7.0, np.array(y, np.uint8), draw(st.booleans())))
    return out


@settings(max_examples=300, deadline=None)
@given(_rankings(), st.lists(st.integers(1, 40), min_size=1, max_size=4, unique=True))
def test_compiled_pass_at_ks_equals_pass_at_k_bit_for_bit(rankings, ks):
    """Every compiled route: without the order, the largest k up to 32 (top K,
    then the scores at or above the K-th largest) and beyond (a selection per
    k); with it, the run of equal scores around place k - 1."""
    off = np.zeros(len(rankings) + 1, np.int64)
    np.cumsum([s.size for s, _, _ in rankings], out=off[1:])
    # a ranking's order: descending, ties by lower index
    order = np.concatenate([np.lexsort((np.arange(s.size), -s)) for s, _, _ in rankings])
    for o in (None, order):
        got = core.pass_at_ks(
            scores=np.concatenate([s for s, _, _ in rankings]),
            offsets=off,
            labels=np.concatenate([y for _, y, _ in rankings]),
            has_labels=np.array([h for _, _, h in rankings], bool),
            ks=np.array(ks, np.int64),
            order=o,
        )
        assert got.shape == (len(ks), len(rankings))
        for i, k in enumerate(ks):
            for t, (s, y, has) in enumerate(rankings):
                want = af.pass_at_k(s, y, k) if has else np.nan
                np.testing.assert_array_equal(
                    np.float64(got[i, t]).view(np.uint64), np.float64(want).view(np.uint64)
                )


@pytest.mark.parametrize("bad", [-1, 3])
def test_pass_at_ks_rejects_an_order_outside_its_task(bad):
    kw = dict(
        scores=np.array([0.5, 0.2, 0.9, 0.1, 0.3]),
        offsets=np.array([0, 3, 5]),
        labels=np.array([1, 0, 0, 1, 1], np.uint8),
        has_labels=np.ones(2, bool),
        ks=np.array([1, 2]),
    )
    order = np.array([2, 0, 1, 1, 0])
    assert core.pass_at_ks(**kw, order=order).shape == (2, 2)
    order[3] = bad  # task 1 has two candidates
    with pytest.raises(ValueError, match="task 1: order holds an index outside the task"):
        core.pass_at_ks(**kw, order=order)
    with pytest.raises(ValueError, match="order must be like scores"):
        core.pass_at_ks(**kw, order=order[:4].copy())


# -- the fast path of rerank_table against the general one ---------------------------


def _table(Bs, labels="all", rng=None):
    rng = rng or np.random.default_rng(0)
    cols = {
        "task_id": [f"t{i}" for i in range(len(Bs))],
        "n": [B.shape[0] for B in Bs],
        "m": [B.shape[1] for B in Bs],
        "B": [pack_rows(B) for B in Bs],
    }
    has = labels is not None
    if has:
        cols["labels"] = [
            None
            if labels == "some" and i % 3 == 1
            else (rng.random(B.shape[0]) < 0.4).astype(np.uint8).tolist()
            for i, B in enumerate(Bs)
        ]
    sch = schema(labels=has, test_count=False)
    return pa.Table.from_pydict(cols, schema=sch).combine_chunks()


def _both(monkeypatch, table, method, has_labels=True, **kw):
    params = method_params(method, {})
    calls = []
    real = _engine._rank_packed

    def spy(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(_engine, "_rank_packed", spy)
    fast, ferr, fb = _engine.rerank_table(table, method, params, has_labels=has_labels, **kw)
    monkeypatch.setattr(_engine, "_rank_packed", lambda *a, **k: None)
    slow, serr, sb = _engine.rerank_table(table, method, params, has_labels=has_labels, **kw)
    assert fast.schema == slow.schema
    assert fast.equals(slow), method
    assert [e.to_dict() for e in ferr] == [e.to_dict() for e in serr]
    assert fb == sb
    return calls


@pytest.mark.parametrize("method", ["aces-c", "majority", "aces-c-filter", "codet"])
@pytest.mark.parametrize("labels", ["all", "some", None])
def test_fast_path_writes_what_the_general_path_writes(monkeypatch, method, labels):
    Bs = _tasks(np.random.default_rng(5), 60)
    table = _table(Bs, labels)
    calls = _both(monkeypatch, table, method, has_labels=labels is not None, n_threads=2)
    assert calls == [True]


def test_fast_path_on_a_slice_of_a_batch(monkeypatch):
    """Record batches from a reader may be slices (nonzero array offsets)."""
    Bs = _tasks(np.random.default_rng(6), 40)
    batch = _table(Bs, "some").to_batches()[0].slice(7, 25)
    assert _both(monkeypatch, batch, "aces-c", has_labels=True) == [True]


def test_a_slice_converts_only_its_own_label_entries():
    """A slice's list ``values`` is its parent's whole child array: the row checks
    convert only the slice's range (else each batch cut from a large row group
    converts the whole group's labels), and its labels are those of the same
    rows written on their own."""
    from aces_fast.parquet import _column, list_parts

    Bs = _tasks(np.random.default_rng(8), 300)
    table = _table(Bs, "some")
    part = table.slice(120, 30)
    off, vals, vnull = list_parts(_column(part, "labels"), np.int64)
    alone = pa.Table.from_pylist(part.to_pylist(), schema=table.schema)
    want_off, want_vals, _ = list_parts(_column(alone, "labels"), np.int64)
    assert off[0] == 0 and vals.size == vnull.size == off[-1]
    np.testing.assert_array_equal(off, want_off)
    np.testing.assert_array_equal(vals, want_vals)
    got, want = packed_batch(part), packed_batch(alone)
    np.testing.assert_array_equal(got.labels, want.labels)
    np.testing.assert_array_equal(got.has_labels, want.has_labels)


def test_bad_rows_take_the_general_path(monkeypatch):
    Bs = _tasks(np.random.default_rng(7), 12)
    table = _table(Bs, "all")
    B = table.column("B").to_pylist()
    k = next(i for i, X in enumerate(Bs) if X.shape[1] % 8)
    B[k] = B[k][:-1] + bytes([B[k][-1] | 1])  # a padding bit
    table = table.set_column(3, "B", pa.array(B, pa.binary()))
    assert packed_batch(table) is not None  # the row checks pass; the kernel sees it
    calls = _both(monkeypatch, table, "aces-c", skip_invalid=True, rows=100)
    assert calls == [False]
    out, errors, _ = _engine.rerank_table(
        table, "aces-c", method_params("aces-c", {}), has_labels=True, skip_invalid=True, rows=100
    )
    assert [e.row for e in errors] == [100 + k] and "padding bits" in errors[0].reason
    assert out.num_rows == len(Bs) - 1
    ids = table.column("task_id").to_pylist()
    bad_labels = table.set_column(
        4, "labels", pa.array([[2] * X.shape[0] for X in Bs], pa.list_(pa.uint8()))
    )
    assert packed_batch(bad_labels) is None
    nulls = table.set_column(0, "task_id", pa.array([None, *ids[1:]], pa.string()))
    assert packed_batch(nulls) is None


def test_methods_without_a_packed_path_take_the_general_path(monkeypatch):
    table = _table(_tasks(np.random.default_rng(8), 10), "all")
    for method, backend in (("b4", None), ("aces-c", "numpy"), ("aces-o", None)):
        calls = _both(monkeypatch, table, method, backend=backend)
        assert calls == [False], (method, backend)


@pytest.mark.parametrize("name", ["majority", "aces-c", "aces-c-filter", "codet"])
def test_a_large_packed_task_equals_its_unpacked_copy(name):
    """Past 2^16 rows a task frees its scratch as it goes and hashes its rows on
    several threads: the packed words handed to it must serve both."""
    rng = np.random.default_rng(3)
    B = (rng.random((70_000, 70)) < 0.4).astype(np.uint8)
    B[::3] = B[1]  # repeated rows: the dedup pass merges them
    data, off, n, m = _packed([B])
    kw = _kw(name, n_threads=2)
    want = core.rerank_batch_flat(tasks=[B], **kw)
    *got, padding = core.rerank_packed(data=data, offsets=off, n=n, m=m, **kw)
    assert not padding.any()
    for w, g in zip(want, got):
        assert (w is None and g is None) or np.array_equal(w, g, equal_nan=True)


def test_a_run_with_labels_and_a_batch_without_them(monkeypatch):
    """A run whose output has pass@k columns (another file has labels) and a batch
    whose file has none: both paths write null pass@k for every row."""
    table = _table(_tasks(np.random.default_rng(9), 20), labels=None)
    assert _both(monkeypatch, table, "aces-c", has_labels=True) == [True]
    out, _, _ = _engine.rerank_table(table, "aces-c", method_params("aces-c", {}), has_labels=True)
    assert out.column("pass@1").null_count == out.num_rows == 20
