"""The public functions' docstrings: numpydoc sections, and examples that run.

Every function in ``aces_fast.__all__`` documents its Parameters (when it takes
any), Returns and Examples in numpydoc form, and the examples are doctests run
here, so a changed result or a renamed argument fails the suite.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import re

import pytest

import aces_fast as af

#: the modules whose docstrings hold the public functions' examples
MODULES = (
    "aces_fast",
    "aces_fast.methods",
    "aces_fast.metrics",
    "aces_fast.batch",
    "aces_fast.config",
    "aces_fast.backends",
    "aces_fast.result",
    "aces_fast.batch_result",
)

PUBLIC_FUNCTIONS = sorted(name for name in af.__all__ if inspect.isfunction(getattr(af, name)))


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    for module in MODULES:
        for test in finder.find(importlib.import_module(module)):
            if test.examples:
                yield pytest.param(test, id=test.name)


@pytest.mark.parametrize("test", list(_doctests()))
def test_docstring_examples_run(test, monkeypatch):
    if test.name.endswith(".to_arrow"):
        pytest.importorskip("pyarrow")  # an optional dependency (the arrow extra)
    monkeypatch.delenv("ACES_FAST_BACKEND", raising=False)  # the documented default
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list = []
    result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)


def _sections(doc: str) -> set:
    return set(re.findall(r"^(\w[\w ]*)\n-{3,}$", doc, flags=re.M))


def test_every_public_function_is_listed():
    assert {
        "aces_c",
        "rerank",
        "majority_vote",
        "codet",
        "b4",
        "rerank_batch",
        "warmup",
        "pass_at_k",
    } <= set(PUBLIC_FUNCTIONS)


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_public_function_has_numpydoc_sections(name):
    fn = getattr(af, name)
    doc = inspect.getdoc(fn) or ""
    sections = _sections(doc)
    takes = list(inspect.signature(fn).parameters.values())
    wanted = {"Returns", "Examples"} | ({"Parameters"} if takes else set())
    assert wanted <= sections, f"{name}: missing {sorted(wanted - sections)}"
    examples = doc[doc.index("Examples\n--------") :]
    assert ">>> " in examples and f"af.{name}(" in examples, name
    if takes:  # every parameter is described (``a, b : type`` covers both)
        params = doc[doc.index("Parameters\n----------") :]
        params = params[: re.search(r"\n\n\w[\w ]*\n-{3,}", params).start()]
        described = {
            n.strip().lstrip("*")
            for line in re.findall(r"^(\S[^:\n]*)", params, flags=re.M)
            for n in line.split(",")
        }
        for p in takes:
            assert p.name in described, f"{name}: parameter {p.name} is not described"


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_public_docs_point_to_public_names(name):
    """The audit found b4's docs sending readers to a private function."""
    doc = inspect.getdoc(getattr(af, name)) or ""
    assert not re.search(r"`[\w.]*\._\w+`", doc), name
