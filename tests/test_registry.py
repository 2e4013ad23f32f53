"""The method registry is the one list of methods and parameters.

Two properties make "adding a method costs one edit" checkable:

* every public method name is spelled in exactly one module of the package,
  ``aces_fast/_registry.py`` (an AST walk finds no other string constant equal
  to one);
* a method registered at run time -- its spec and its semantics, nothing else --
  is reachable through ``rerank``, ``rerank_batch``, ``METHODS``, ``evaluate``
  and the CLI's flags on every backend.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

import aces_fast as af
from aces_fast import _registry, _semantics, cli
from aces_fast._registry import MethodSpec, Param, Real
from aces_fast.datasets import load_dataset
from aces_fast.evaluation import ALL_METHODS, evaluate
from helpers import EXAMPLE, npy, random_matrix

PACKAGE = Path(af.__file__).parent


def _all_names(tree: ast.AST) -> set:
    """String constants that are Python identifiers listed in ``__all__``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                out |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return out


def test_method_names_are_spelled_in_the_registry_only():
    names = set(_registry.names())
    assert {"majority", "aces-c", "aces-o-warm", "codet-linear", "b4"} <= names
    found = []
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 20
    for path in modules:
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "_registry.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        exported = _all_names(tree)  # e.g. "codet", "b4": the functions' names
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in names
                and id(node) not in exported
            ):
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "method names outside _registry.py:\n" + "\n".join(found)
    registry_text = (PACKAGE / "_registry.py").read_text()
    for name in names:
        assert f'"{name}"' in registry_text


def test_public_defaults_come_from_the_registry():
    spec_of = {
        "aces_c": _registry.ACES_C,
        "aces_o": _registry.ACES_O,
        "codet": _registry.CODET,
        "b4": _registry.B4,
    }
    for fn_name, spec in spec_of.items():
        sig = inspect.signature(getattr(af, fn_name))
        for p in spec.params:
            assert sig.parameters[p.name].default == p.default, (fn_name, p.name)
    assert inspect.signature(af.rerank).parameters["method"].default == _registry.DEFAULT_METHOD
    assert list(af.METHODS) == list(_registry.names())
    assert list(ALL_METHODS)[1:-1] == list(_registry.names())


def test_every_default_passes_its_own_check_unchanged():
    # validate() takes a parameter given as its default object without checking
    for spec in _registry.specs():
        for p in spec.params:
            got = p.check(p.default, p.name)
            assert got == p.default and type(got) is type(p.default), (spec.name, p.name)
        assert spec.validate({p.name: p.default for p in spec.params}) == spec.validate({})


def test_a_given_value_equal_to_the_default_is_still_checked():
    # only the default object itself skips the check
    with pytest.raises(TypeError, match="tie_tol"):
        _registry.ACES_C.validate({"tie_tol": "1e-9"})
    assert _registry.ACES_C.validate({"tie_tol": 1e-9})["tie_tol"] == 1e-9


def test_method_params_validates_and_fills_in():
    assert _registry.method_params("aces-o-warm", {"lr": 0.05})["init"] == "aces-c"
    assert _registry.method_params("aces-o", tunable=True) == {
        "gamma": 10.0,
        "lr": 0.01,
        "steps": 90,
        "top_k": 24,
    }
    with pytest.raises(TypeError, match="unexpected parameter.*lr"):
        _registry.method_params("aces-c", {"lr": 0.1})
    with pytest.raises(ValueError, match="unknown hyperparameter.*aces-o: tie_tol"):
        _registry.method_params("aces-o", {"tie_tol": 0.0}, tunable=True)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        _registry.method_params("aces-o", {"gamma": 0.0})
    with pytest.raises(ValueError, match="unknown method"):
        _registry.method_params("aces-x")
    assert _registry.ACES_O.result_name({"init": "aces-c"}) == "aces-o-warm"
    from aces_fast._compiled import core

    if core is not None:  # compiled codes come from the extension, by the spec's core_method
        assert _registry.ACES_O_WARM.code == core.METHOD_CODES["aces-o"]
        assert {s.name: s.code for s in _registry.specs() if s.code is not None} == {
            "majority": 0,
            "aces-c": 1,
            "aces-c-filter": 2,
            "aces-o": 3,
            "aces-o-warm": 3,
            "codet": 4,
            "codet-linear": 4,
        }
    assert _registry.B4.code is None
    assert _registry.CODET.result_name({"exponent": 1.0}) == "codet-linear"
    assert _registry.CODET_LINEAR.result_name({"exponent": 2.0}) == "codet"


def test_core_args_are_named_as_the_extension_takes_them():
    """A spec's ``core_args`` name ``_core.rerank``'s keywords: called with them by
    name, the extension gives what ``rerank`` gives, and ``pack`` reads the
    extension's tuple by ``Outputs``' names."""
    from aces_fast._compiled import core

    if core is None:
        pytest.skip("the compiled extension is not built")
    B = np.ascontiguousarray(random_matrix(np.random.default_rng(3), 12, 9), dtype=np.uint8)
    seen = set()
    for spec in _registry.specs():
        if spec.core_args is None:
            continue
        values = spec.validate({"steps": 7} if "steps" in {p.name for p in spec.params} else {})
        args = spec.core_args(values)
        assert isinstance(args, _registry.CoreArgs)
        fields = args._asdict()
        del fields["exponent"]  # given to _core as the power table
        power = None if args.exponent is None else _registry.power_table(args.exponent, len(B))
        out = core.rerank(B=B, method=spec.code, **fields, power=power, dedup=None, n_threads=1)
        got = spec.pack(_semantics.Outputs._make(out), values, "cpp")
        want = af.rerank(B, spec.name, backend="cpp", **values)
        assert got.method == want.method and got.fallback == want.fallback
        assert sorted(got.info) == sorted(want.info)
        for field in ("scores", "order", "weights", "loo_auc", "objective"):
            a, b = getattr(got, field), getattr(want, field)
            assert (a is None) == (b is None), field
            if a is not None:
                np.testing.assert_array_equal(a, b)
        seen.add(spec.name)
        if spec.name == "aces-o-warm":
            assert args.warm and args.steps == 7 and args.top_k == 24
    assert seen == {
        "majority",
        "aces-c",
        "aces-c-filter",
        "aces-o",
        "aces-o-warm",
        "codet",
        "codet-linear",
    }
    assert _registry.ACES_O.core_args(_registry.ACES_O.validate({"bins": 64})) is None


# ---------------------------------------------------------------------------
# a method added at run time


def _toy(nx, B, scale):
    """Candidates ranked by ``scale`` times their passes over the non-constant tests."""
    keep = _semantics.nonconstant(nx.column_sums(B), nx.row_count(B))
    scores = nx.to_float(nx.row_sums(B * keep)) * scale
    return _semantics.Outputs(scores, None, _semantics.descending_order(nx, scores))


TOY = MethodSpec(
    name="toy-passes",
    summary="test only: scale x passes over the non-constant tests",
    semantics=_toy,
    args=lambda v: (v["scale"],),
    params=(
        Param(
            "scale", 1.0, Real(positive=True), "multiplies the passes", tunable=True, metavar="S"
        ),
    ),
    weights=False,
    info=("scale",),
)


@pytest.fixture
def toy():
    """TOY registered for the test, removed afterwards (the registry restored)."""
    before = _registry.names()
    _registry.register(TOY)
    try:
        yield TOY.name
    finally:
        _registry.unregister(TOY.name)
    assert _registry.names() == before


def _expected(B, scale):
    B = np.asarray(B)
    c = B.sum(axis=0)
    return (B[:, (c > 0) & (c < B.shape[0])].sum(axis=1) * scale).astype(np.float64)


def test_registered_method_reaches_rerank_on_every_backend(toy, backend):
    res = af.rerank(EXAMPLE, toy, scale=2.5, backend=backend)
    assert res.method == toy and res.backend == backend and res.weights is None
    np.testing.assert_array_equal(npy(res.scores), _expected(EXAMPLE, 2.5))
    assert npy(res.order).tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert res.info == {"scale": 2.5}
    assert af.METHODS[toy](EXAMPLE, backend=backend).info == {"scale": 1.0}
    with pytest.raises(ValueError, match="scale must be > 0"):
        af.rerank(EXAMPLE, toy, scale=-1.0, backend=backend)
    with pytest.raises(TypeError, match="unexpected parameter"):
        af.rerank(EXAMPLE, toy, lr=0.1, backend=backend)


def test_registered_method_reaches_rerank_batch(toy, backend):
    rng = np.random.default_rng(0)
    tasks = [random_matrix(rng, n, m) for n, m in [(5, 4), (9, 7), (1, 3), (6, 0)]]
    results = af.rerank_batch(tasks, toy, scale=3.0, backend=backend)
    for B, res in zip(tasks, results):
        assert res.method == toy
        np.testing.assert_array_equal(npy(res.scores), _expected(B, 3.0))


def test_registered_method_reaches_evaluate(toy):
    ds = load_dataset("humaneval-gpt35")
    assert toy in ALL_METHODS and toy in af.METHODS
    ev = evaluate(ds, ["majority", toy], backend="numpy", params={toy: {"scale": 3.0}})
    assert ev.params[toy] == {"scale": 3.0} and ev.backends[toy] == "numpy"
    # scaled pass counts over the non-constant tests rank as majority vote does
    np.testing.assert_array_equal(ev.pass_at[toy], ev.pass_at["majority"])


def test_registered_method_reaches_the_cli(toy, tmp_path, capsys):
    np.save(tmp_path / "m.npy", EXAMPLE)
    assert (
        cli.main(
            [
                "rerank",
                str(tmp_path / "m.npy"),
                "--method",
                toy,
                "--toy-passes-scale",
                "4",
                "--json",
                "--backend",
                "numpy",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == toy and out["params"] == {"scale": 4.0}
    np.testing.assert_array_equal(out["scores"], _expected(EXAMPLE, 4.0))
    assert (
        cli.main(
            [
                "evaluate",
                "humaneval-gpt35",
                "--methods",
                f"majority,{toy}",
                "--json",
                "-q",
                "--backend",
                "numpy",
                "--toy-passes-scale",
                "2",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)["datasets"][0]
    assert out["params"][toy] == {"scale": 2.0}
    assert out["all"][toy] == out["all"]["majority"]
