"""The documentation agrees with the library.

``docs/contract.rst`` states exact values (the worked example of §6) and every
default (§3.8). These tests read them *from the docs file* and compare them
with what the library computes, so the contract cannot drift from the code.
The last test builds the Sphinx site with warnings as errors.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import aces_fast as af

DOCS = Path(__file__).resolve().parent.parent / "docs"
CONTRACT = DOCS / "contract.rst"
EXACT = 1e-12


# ---------------------------------------------------------------------------
# reading the contract


def contract_text() -> str:
    return CONTRACT.read_text(encoding="utf-8")


def section(anchor: str) -> str:
    """Text from the label ``.. _<anchor>:`` up to the next ``.. _contract-`` label."""
    text = contract_text()
    start = text.index(f".. _{anchor}:\n")
    end = text.find("\n.. _contract-", start + 1)
    return text[start:] if end < 0 else text[start:end]


def simple_table(block: str) -> list[list[str]]:
    """Rows (header first) of the first reST simple table in ``block``.

    Column extents come from the ``=====  ===`` border line; the last column
    runs to the end of the line.
    """
    lines = block.splitlines()
    border = re.compile(r"^\s*=+( +=+)*\s*$")
    idx = [i for i, line in enumerate(lines) if border.match(line)]
    assert len(idx) >= 3, "no simple table found"
    first, last = idx[0], idx[2]
    spans = [m.span() for m in re.finditer(r"=+", lines[first])]
    rows = []
    for line in lines[first + 1 : last]:
        if border.match(line) or not line.strip():
            continue
        cells = [
            line[a : b if k < len(spans) - 1 else None].strip() for k, (a, b) in enumerate(spans)
        ]
        rows.append(cells)
    return rows


def table_by_label(anchor: str) -> dict[str, list[str]]:
    """A simple table whose first column labels its rows: label -> other cells."""
    rows = simple_table(section(anchor))
    return {row[0]: row[1:] for row in rows}


def fractions(cells: Sequence[str]) -> list[Fraction]:
    return [Fraction(c) for c in cells]


def example() -> tuple:
    """The worked example's matrix and labels, parsed from §6."""
    rows = re.findall(
        r"^\s+(\d+)\s+((?:[01] ){9}[01])\s+(correct|incorrect)\s*$",
        section("contract-6-matrix"),
        flags=re.M,
    )
    B = np.array([[int(v) for v in bits.split()] for _, bits, _ in rows], dtype=np.uint8)
    y = np.array([1 if lab == "correct" else 0 for _, _, lab in rows], dtype=np.uint8)
    assert [int(i) for i, _, _ in rows] == list(range(1, len(rows) + 1))
    return B, y


def exact_auc(scores: Sequence[float], labels: Sequence[int]) -> Fraction:
    """AUC by pairs with exact comparison of the given values (§2.1)."""
    pos = [s for s, t in zip(scores, labels) if t]
    neg = [s for s, t in zip(scores, labels) if not t]
    total = sum(
        Fraction(1) if p > f else Fraction(1, 2) if p == f else Fraction(0)
        for p in pos
        for f in neg
    )
    return total / (len(pos) * len(neg))


def as_float_array(values: Sequence[Fraction]) -> np.ndarray:
    return np.array([float(v) for v in values])


# ---------------------------------------------------------------------------
# §6: the worked example


def test_example_matrix_and_labels():
    B, y = example()
    assert B.shape == (8, 10)
    np.testing.assert_array_equal(y, [1, 1, 1, 0, 0, 0, 0, 0])
    per_candidate = table_by_label("contract-6-scores")
    assert per_candidate["candidate"] == [str(i) for i in range(1, 9)]
    np.testing.assert_array_equal([int(v) for v in per_candidate["label"]], y)
    np.testing.assert_array_equal([int(v) for v in per_candidate["row sum"]], B.sum(axis=1))
    per_test = table_by_label("contract-6-values")
    assert per_test["test"] == [str(j) for j in range(1, 11)]
    assert fractions(per_test["pass rate p"]) == [Fraction(int(c), 8) for c in B.sum(axis=0)]


def test_example_loo_auc(backend):
    B, _ = example()
    want = as_float_array(fractions(table_by_label("contract-6-values")["LOO-AUC, uniform"]))
    np.testing.assert_allclose(np.asarray(af.loo_auc(B, backend=backend)), want, rtol=0, atol=EXACT)
    # §2.3: float weights w = 1/m give the same exact values through the tie rule
    got = af.loo_auc(B, np.full(B.shape[1], 0.1), backend=backend)
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=EXACT)


def test_example_naive_float_artefacts():
    """The "naive float64" row: what ``B @ w - w[j] * B[:, j]`` gives with plain
    float comparison, as §6 says, and that it differs from the exact values."""
    B, _ = example()
    rows = table_by_label("contract-6-values")
    naive_doc = fractions(rows["naive float64"])
    w = np.full(B.shape[1], 1 / 10)
    s = B.astype(np.float64) @ w
    naive = [exact_auc(list(s - w[j] * B[:, j]), list(B[:, j])) for j in range(B.shape[1])]
    np.testing.assert_allclose(
        [float(v) for v in naive], [float(v) for v in naive_doc], rtol=0, atol=EXACT
    )
    assert naive_doc != fractions(rows["LOO-AUC, uniform"])


def test_example_weights(backend):
    B, _ = example()
    rows = table_by_label("contract-6-values")
    loo = as_float_array(fractions(rows["LOO-AUC, uniform"]))
    res = af.aces_c(B, backend=backend)
    assert not res.fallback
    np.testing.assert_allclose(
        np.asarray(res.weights),
        as_float_array(fractions(rows["ACES-C weight"])),
        rtol=0,
        atol=EXACT,
    )
    np.testing.assert_allclose(np.asarray(res.loo_auc), loo, rtol=0, atol=EXACT)
    filt = af.aces_c(B, variant="filter", backend=backend)
    np.testing.assert_allclose(
        np.asarray(filt.weights),
        as_float_array(fractions(rows["ACES-C filter weight"])),
        rtol=0,
        atol=EXACT,
    )
    maj = af.majority_vote(B, backend=backend)
    np.testing.assert_allclose(
        np.asarray(maj.weights),
        as_float_array(fractions(rows["majority weight"])),
        rtol=0,
        atol=EXACT,
    )


def test_example_weights_follow_the_stated_formulas():
    """The table's ACES-C rows follow from its LOO-AUC and pass-rate rows by the
    formulas of §3.2, in exact arithmetic."""
    rows = table_by_label("contract-6-values")
    L = fractions(rows["LOO-AUC, uniform"])
    p = fractions(rows["pass rate p"])
    half = Fraction(1, 2)
    raw = [max(Fraction(0), Lj - half) * pj * (1 - pj) for Lj, pj in zip(L, p)]
    assert [r / sum(raw) for r in raw] == fractions(rows["ACES-C weight"])
    keep = [Fraction(int(Lj > half)) for Lj in L]
    assert [k / sum(keep) for k in keep] == fractions(rows["ACES-C filter weight"])


def test_example_scores(backend):
    B, _ = example()
    rows = table_by_label("contract-6-scores")
    for method, label in (("majority", "majority score"), ("aces-c", "ACES-C score")):
        res = af.rerank(B, method, backend=backend)
        np.testing.assert_allclose(
            np.asarray(res.scores),
            as_float_array(fractions(rows[label])),
            rtol=0,
            atol=EXACT,
            err_msg=method,
        )


def test_example_ranking_auc(backend):
    B, y = example()
    rows = table_by_label("contract-6-auc")
    assert set(rows) == {"method", "majority", "aces-c"}
    for method in ("majority", "aces-c"):
        res = af.rerank(B, method, backend=backend)
        scores = np.asarray(res.scores).tolist()
        assert exact_auc(scores, y.tolist()) == Fraction(rows[method][0]), method


# ---------------------------------------------------------------------------
# §3.8: names and defaults

#: public functions whose defaults the contract must list (plus ``backend=None``)
DEFAULTED = (
    "loo_auc",
    "surrogate_loo_auc",
    "majority_vote",
    "aces_c",
    "aces_o",
    "codet",
    "b4",
    "mbr_exec",
    "combine",
    "rerank",
    "rerank_batch",
    "pass_at_k",
    "pass_at_k_unbiased",
    "diagnostics",
)


def defaults_table() -> list[list[str]]:
    rows = simple_table(section("contract-3-8").split("Defaults of the public functions")[1])
    assert rows[0][:3] == ["function", "parameter", "default"]
    return rows[1:]


def unquote(cell: str) -> str:
    m = re.fullmatch(r"``(.+)``", cell)
    assert m, f"expected a ``literal`` cell, got {cell!r}"
    return m.group(1)


def test_defaults_equal_signatures():
    rows = defaults_table()
    assert len(rows) >= 20
    for func, param, default, _meaning in rows:
        fn = getattr(af, unquote(func))
        sig = inspect.signature(fn).parameters
        name = unquote(param)
        assert name in sig, f"{func} has no parameter {name}"
        stated = ast.literal_eval(unquote(default))
        actual = sig[name].default
        assert actual is not inspect.Parameter.empty, f"{func}({name}) has no default"
        assert type(actual) is type(stated) or {type(actual), type(stated)} <= {int, float}
        assert actual == stated, f"{func}({name}): docs say {stated!r}, code has {actual!r}"


def test_every_default_is_documented():
    listed = {(unquote(f), unquote(p)) for f, p, _, _ in defaults_table()}
    for name in DEFAULTED:
        params = inspect.signature(getattr(af, name)).parameters
        assert params["backend"].default is None, name
        for p in params.values():
            if p.default is not inspect.Parameter.empty and p.name != "backend":
                assert (name, p.name) in listed, f"default of {name}({p.name}) missing in §3.8"


def test_method_names_and_equivalent_calls():
    B, _ = example()
    rows = simple_table(section("contract-3-8"))
    assert rows[0] == ["name", "equivalent call"]
    names = {unquote(name): unquote(call) for name, call in rows[1:]}
    assert set(names) == set(af.METHODS)
    namespace = {fn: getattr(af, fn) for fn in af.__all__}
    for name, call in names.items():
        direct = eval(call, namespace, {"B": B})  # our own docs
        via_rerank = af.rerank(B, name)
        assert direct.method == via_rerank.method == name
        np.testing.assert_array_equal(np.asarray(direct.scores), np.asarray(via_rerank.scores))
        np.testing.assert_array_equal(np.asarray(direct.order), np.asarray(via_rerank.order))


def test_section_anchors_match_numbered_titles():
    """Every ``contract-N`` / ``contract-N-M`` label sits on the title numbered
    ``N.`` / ``N.M``, sections 1-7 all exist, in order: code cites these."""
    text = contract_text()
    found = re.findall(r"^\.\. _contract-([\d-]+):\n\n(.+)\n([-~]+)$", text, flags=re.M)
    assert found, "no numbered section anchors"
    top = []
    for anchor, title, underline in found:
        parts = anchor.split("-")
        number = parts[0] + "." if len(parts) == 1 else ".".join(parts)
        assert title.startswith(number + " "), (anchor, title)
        assert len(underline) >= len(title), title
        if len(parts) == 1:
            top.append(int(parts[0]))
    assert top == list(range(1, 8))


# ---------------------------------------------------------------------------
# the Sphinx build


def test_sphinx_build_has_no_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(tmp_path / "html"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (tmp_path / "html" / "contract.html").read_text(encoding="utf-8")
    assert 'id="contract-6-values"' in html
    api = (tmp_path / "html" / "api.html").read_text(encoding="utf-8")
    for name in ("rerank", "aces_o", "RerankResult", "pass_at_k_unbiased"):
        assert f'id="aces_fast.{name}"' in api, name
