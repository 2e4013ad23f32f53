"""tools/gpu_parity.py (issue 22): its comparison catches a mismatch, and its run
on CPU tensors (the logic the GPU run uses) passes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("torch")

from helpers import load_tool

parity = load_tool("gpu_parity")


def _res(order, scores, weights=None):
    return SimpleNamespace(
        order=np.array(order), scores=np.array(scores, float), weights=weights, objective=None
    )


def test_compare_flags_orders_floats_and_missing_fields():
    ref = _res([1, 0], [0.2, 0.8], np.array([0.5, 0.5]))
    assert parity.compare("aces-c", ref, ref)[0] is None
    assert (
        parity.compare("aces-c", _res([0, 1], [0.2, 0.8], ref.weights), ref)[0] == "order differs"
    )
    near = _res([1, 0], [0.2, 0.8], np.array([0.5 + 1e-8, 0.5]))
    why, diff = parity.compare("aces-c", near, ref)
    assert why.startswith("weights: max |diff|") and diff == pytest.approx(1e-8)
    # ACES-O weights are held to the torch tests' 1e-6
    assert parity.compare("aces-o", near, ref)[0] is None
    assert parity.compare("aces-c", _res([1, 0], [0.2, 0.8]), ref)[0] == "weights: one side is None"
    nan = _res([1, 0], [np.nan, 0.8], ref.weights)
    assert "NaN" in parity.compare("aces-c", nan, ref)[0]


def test_b4_scores_are_held_to_the_rounding_of_their_log_gamma_terms():
    """B4's tolerance is the contract's 1e-14 L (L grows with n m and the priors),
    never below the 1e-9 of the other floats, and on scores only."""
    ref = _res([0, 1], [-23.0, -25.0])
    off = _res([0, 1], [-23.0 + 5e-9, -25.0])
    assert parity.compare("b4", off, ref)[0].startswith("scores: max |diff|")
    L = parity.b4_scale((200, 500))  # lnΓ(100 000 + 11 002) ~ 1.2e6
    assert 1.0e6 < L < 1.5e6
    assert parity.compare("b4", off, ref, L)[0] is None
    assert parity.compare("b4", _res([0, 1], [-23.0 + 1e-7, -25.0]), ref, L)[0] is not None
    assert parity.compare("codet", off, ref, L)[0] is not None
    assert parity.b4_scale((1, 1)) > 0


def test_random_cases_cover_every_shared_family():
    """The parity check draws the tests' fuzzing families (one generator for
    both), every family at every shape it is given."""
    from benchmarks.harness import families

    assert parity.FAMILIES == families.FAMILIES
    labels = [label for label, _ in parity.cases(2, ((3, 4), (1, 1)), max_problems=0)]
    assert len(labels) == len(families.FAMILIES) * 2 * 2
    for family in families.FAMILIES:
        assert f"{family} 3x4 #1" in labels and f"{family} 1x1 #0" in labels


def test_parity_on_cpu_tensors_passes_and_prints_one_line_per_method(capsys):
    import aces_fast as af

    rc = parity.main(["--device", "cpu", "--quick", "--max-problems", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = out.splitlines()
    for method in [*af.METHODS, "loo-auc", "surrogate"]:
        row = next(ln.split() for ln in lines if ln.split()[:1] == [method])
        assert int(row[1]) > 0 and row[2] == "0"
    assert lines[-1].split()[0] == "all"
